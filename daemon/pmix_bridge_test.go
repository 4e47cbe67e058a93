package daemon

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/lab/testnet"
)

// TestPMIxBridge checks the forwarding of daemon/PMIX.md end to end with a
// real PMIx server: node 0's `vigil daemon` output feeds
// csrc/pmix/vigil_pmix_bridge.c, a PMIx server host (libpmix's server
// library) whose two clients, csrc/pmix/pmix_listener.c, are ranks 0 and 1
// of the PMIx namespace and print the events their handlers receive. Node
// 1's daemon runs ranks 2 and 3 (`sleep`). A SIGKILL of rank 2 must reach
// both clients as PMIX_ERR_PROC_ABORTED_BY_SIG for rank 2; a SIGKILL of
// node 1's daemon as PMIX_EVENT_NODE_DOWN for node 1 with ranks 2 and 3.
func TestPMIxBridge(t *testing.T) {
	if testing.Short() {
		t.Skip("builds C programs and the vigil binary")
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skipf("no gcc: %v", err)
	}
	pc, err := exec.Command("pkg-config", "--cflags", "--libs", "pmix").Output()
	if err != nil {
		t.Skipf("no PMIx development files (pkg-config pmix: %v); install libpmix-dev", err)
	}
	dir := t.TempDir()
	bin := buildVigil(t, dir)
	cc := func(src, out string) string {
		exe := filepath.Join(dir, out)
		args := append([]string{"-O2", "-Wall", "-Wextra", "-Werror", "-o", exe, filepath.Join("../csrc/pmix", src)}, strings.Fields(string(pc))...)
		if b, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %s: %v\n%s", src, err, b)
		}
		return exe
	}
	bridge, listener := cc("vigil_pmix_bridge.c", "bridge"), cc("pmix_listener.c", "listener")

	peers := testnet.FreeAddrs(t, 2)
	env := append(os.Environ(), "VIGIL_DAEMON_KEY=00112233445566778899aabbccddeeff")
	kill := func(c *exec.Cmd) {
		syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		c.Wait()
	}
	daemonCmd := func(i int, extra ...string) *exec.Cmd {
		c := exec.Command(bin, append([]string{"daemon", "-node", fmt.Sprint(i), "-peers", strings.Join(peers, ","),
			"-ppn", "2", "-h", "20ms", "-delta", "500ms"}, extra...)...)
		c.Env = env
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return c
	}
	// Node 0: daemon | bridge, the bridge's clients being ranks 0 and 1.
	d0 := daemonCmd(0)
	br := exec.Command(bridge, "-size", "4", "-ppn", "2", "-node", "0", "--", listener, "2")
	br.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	br.Env = append(os.Environ(), "TMPDIR="+dir) // the server's rendezvous files
	if br.Stdin, err = d0.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	var brErr strings.Builder
	br.Stderr = &brErr
	out, err := br.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*exec.Cmd{d0, br} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { kill(c) })
	}
	d1 := daemonCmd(1, "--", "sleep", "600")
	if err := d1.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kill(d1) })

	type ev struct {
		Ev       string `json:"ev"`
		Rank     int    `json:"rank"`
		Status   int    `json:"status"`
		Affected []int  `json:"affected"`
		Node     int    `json:"node"`
	}
	lines := make(chan ev, 64)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e ev
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				lines <- e
			}
		}
		close(lines)
	}()
	deadline := time.After(60 * time.Second)
	next := func(what string) ev {
		select {
		case e, ok := <-lines:
			if !ok {
				t.Fatalf("%s: the bridge's clients ended\n%s", what, brErr.String())
			}
			return e
		case <-deadline:
			t.Fatalf("%s: timed out\n%s", what, brErr.String())
		}
		return ev{}
	}
	for ready := 0; ready < 2; {
		if e := next("the PMIx clients' ready lines"); e.Ev == "ready" {
			ready++
		}
	}
	time.Sleep(3 * time.Second) // past the daemons' start grace
	expect := func(what string, status int, affected []int) {
		t.Helper()
		got := map[int]bool{}
		for len(got) < 2 {
			e := next(what)
			if e.Ev != "pmix" || e.Status != status || !slices.Equal(e.Affected, affected) || e.Node != 1 || got[e.Rank] {
				t.Fatalf("%s: unexpected %+v", what, e)
			}
			got[e.Rank] = true
		}
	}
	t0 := time.Now()
	syscall.Kill(pidByRank(t, d1.Process.Pid, 2), syscall.SIGKILL)
	expect("rank 2 killed", -402, []int{2}) // PMIX_ERR_PROC_ABORTED_BY_SIG in PMIx 4.2
	t.Logf("rank 2 SIGKILLed: PMIX_ERR_PROC_ABORTED_BY_SIG at both PMIx clients of node 0 after %v", time.Since(t0))
	t0 = time.Now()
	syscall.Kill(d1.Process.Pid, syscall.SIGKILL)
	expect("node 1 killed", -231, []int{2, 3}) // PMIX_EVENT_NODE_DOWN in PMIx 4.2
	t.Logf("node 1's daemon SIGKILLed: PMIX_EVENT_NODE_DOWN (ranks 2, 3) at both clients after %v", time.Since(t0))
}
