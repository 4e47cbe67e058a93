package mpitest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// refusedAfter dials a closed port of a (the host's kernel answers with a
// reset) and returns how long the refusal took.
func refusedAfter(t *testing.T, a netip.Addr, timeout time.Duration) (time.Duration, error) {
	t.Helper()
	t0 := time.Now()
	c, err := net.DialTimeout("tcp", netip.AddrPortFrom(a, 9).String(), timeout)
	if err == nil {
		c.Close()
		t.Fatalf("%s:9 accepted a connection", a)
	}
	return time.Since(t0), err
}

// TestHosts checks the simulated hosts without mpirun: the launcher agent
// runs a command on the named host under its host name and address; a
// host is reachable from the root namespace; Delay delays what it sends;
// Loss drops its frames; Kill leaves no process on it; LinkDown cuts it
// off and LinkUp puts it back.
func TestHosts(t *testing.T) {
	h := NewHosts(t, 2, 1)
	for i := range h.N() {
		out, err := exec.Command(h.agent, h.Addr(i).String(), "hostname;", "ip", "-br", "addr", "show", "eth0").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), h.Name(i)+"\n") || !strings.Contains(string(out), h.Addr(i).String()+"/24") {
			t.Fatalf("agent on host %d: %v\n%s", i, err, out)
		}
	}
	if out, err := exec.Command(h.agent, "192.0.2.99", "true").CombinedOutput(); err == nil {
		t.Fatalf("agent ran a command on an unknown host: %s", out)
	}

	// The reset comes back through the relay: after the delay, and sooner
	// than a lost reset would make it (the SYN's retransmission after 1 s,
	// plus the delay).
	for _, d := range []time.Duration{0, 300 * time.Millisecond} {
		h.Delay(1, d)
		took, err := refusedAfter(t, h.Addr(1), 5*time.Second)
		if !errors.Is(err, syscall.ECONNREFUSED) || took < d || took > d+900*time.Millisecond {
			t.Fatalf("host 1 delayed by %v: refused after %v (%v)", d, took, err)
		}
	}
	h.Delay(1, 0)

	// Loss drops every frame at rate 1 (the SYN or its reset), none at 0.
	h.Loss(1, 1)
	if _, err := refusedAfter(t, h.Addr(1), 300*time.Millisecond); err == nil || errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("host 1 with loss rate 1: %v, want a time-out", err)
	}
	h.Loss(1, 0)
	if _, err := refusedAfter(t, h.Addr(1), 5*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("host 1 with loss rate 0: %v", err)
	}

	sleeper := exec.Command(h.agent, h.Addr(0).String(), "sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(5 * time.Second); len(h.PIDs(0)) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("no process on host 0 after starting one there")
		}
	}
	h.Kill(0)
	if err := sleeper.Wait(); err == nil {
		t.Fatal("the agent reported success for a command killed with its host")
	}

	for i := range h.N() {
		if _, err := refusedAfter(t, h.Addr(i), 5*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("host %d before LinkDown: %v", i, err)
		}
		h.LinkDown(i)
		if _, err := refusedAfter(t, h.Addr(i), 300*time.Millisecond); err == nil || errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("host %d after LinkDown: %v, want a time-out", i, err)
		}
		h.LinkUp(i)
		if _, err := refusedAfter(t, h.Addr(i), 5*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("host %d after LinkUp: %v", i, err)
		}
	}
}

// TestHostsDecoys checks HostsOptions.Decoys: each host's first address is
// its decoy, yet its kernel reaches the other host from its bridge
// address.
func TestHostsDecoys(t *testing.T) {
	h := NewHostsWith(t, 2, HostsOptions{Decoys: true})
	for i := range h.N() {
		if a := h.FirstAddr(i); a != h.DecoyAddr(i) || h.Subnet().Contains(a) {
			t.Fatalf("host %d's first address is %s, want its decoy %s", i, a, h.DecoyAddr(i))
		}
		other := h.Addr(1 - i)
		out, err := exec.Command(h.agent, h.Addr(i).String(), "ip", "route", "get", other.String()).CombinedOutput()
		if err != nil || !strings.Contains(string(out), " src "+h.Addr(i).String()+" ") {
			t.Fatalf("host %d: ip route get %s: %v\n%s", i, other, err, out)
		}
	}
}

// recordTB records what skipHosts asks of its test.
type recordTB struct {
	testing.TB
	fatal, skip string
}

func (r *recordTB) Helper()                      {}
func (r *recordTB) Fatalf(f string, args ...any) { r.fatal = fmt.Sprintf(f, args...) }
func (r *recordTB) Skipf(f string, args ...any)  { r.skip = fmt.Sprintf(f, args...) }

// TestSkipHosts: a missing requirement skips the test, or fails it with
// EnvRequireHosts=1.
func TestSkipHosts(t *testing.T) {
	for _, tc := range []struct{ env, fatal, skip string }{
		{"", "", "no ip(8) here"},
		{"0", "", "no ip(8) here"},
		{"1", "no ip(8) here (" + EnvRequireHosts + "=1: required)", ""},
	} {
		t.Setenv(EnvRequireHosts, tc.env)
		r := &recordTB{TB: t}
		skipHosts(r, "no %s here", "ip(8)")
		if r.fatal != tc.fatal || r.skip != tc.skip {
			t.Errorf("%s=%q: fatal %q, skip %q; want %q, %q", EnvRequireHosts, tc.env, r.fatal, r.skip, tc.fatal, tc.skip)
		}
	}
}

// reachable reports whether host from reaches host to: a dial of a closed
// port there is refused within 500 ms, rather than left unanswered.
func reachable(t *testing.T, h *Hosts, from, to int) bool {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", h.Name(from), "timeout", "0.5", "bash", "-c",
		fmt.Sprintf("exec 3<>/dev/tcp/%s/9", h.Addr(to))).CombinedOutput()
	if strings.Contains(string(out), "refused") {
		return true
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 124 { // timeout(1): no answer
		return false
	}
	t.Fatalf("dial from host %d to host %d: %v\n%s", from, to, err, out)
	return false
}

// TestHostsSplit: Split cuts the hosts named off from the others and from
// the root namespace, not from each other; Rejoin heals it.
func TestHostsSplit(t *testing.T) {
	h := NewHosts(t, 3)
	h.Split(1, 2)
	for _, c := range []struct {
		from, to int
		want     bool
	}{{0, 1, false}, {2, 0, false}, {1, 2, true}, {2, 1, true}} {
		if got := reachable(t, h, c.from, c.to); got != c.want {
			t.Fatalf("split {1, 2}: host %d reaches host %d: %v, want %v", c.from, c.to, got, c.want)
		}
	}
	if _, err := refusedAfter(t, h.Addr(1), 300*time.Millisecond); err == nil || errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("host 1 from the root namespace after Split: %v, want a time-out", err)
	}
	h.Rejoin()
	// A neighbour left unresolved during the split is asked for again
	// after its retransmission time (1 s).
	for _, c := range [][2]int{{0, 1}, {2, 0}, {1, 2}} {
		for try := 0; !reachable(t, h, c[0], c[1]); try++ {
			if try == 5 {
				t.Fatalf("after Rejoin: host %d does not reach host %d", c[0], c[1])
			}
		}
	}
	if _, err := refusedAfter(t, h.Addr(1), 5*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("host 1 from the root namespace after Rejoin: %v", err)
	}
}
