package daemon

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/lab/testnet"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
)

// The local socket against processes that are not the job's (issue #30):
// another user, silent connections, late or bad first lines.

// envLocalHelper makes the test binary, run again, a local process of
// the test (TestLocalHelper): "strangers:N" connects N times to
// $VIGIL_TEST_SOCK and counts how many the daemon closed; "late" (a
// spawned rank) connects, says so, and sends its hello a second later.
const envLocalHelper = "VIGIL_TEST_LOCAL"

// TestLocalHelper is not a test: the body of the helper processes.
func TestLocalHelper(t *testing.T) {
	mode := os.Getenv(envLocalHelper)
	if mode == "" {
		t.Skip("helper process only")
	}
	if n, ok := strings.CutPrefix(mode, "strangers:"); ok {
		times, _ := strconv.Atoi(n)
		closed := 0
		for range times {
			c, err := net.Dial("unix", os.Getenv("VIGIL_TEST_SOCK"))
			if err != nil {
				fmt.Println("dial:", err)
				os.Exit(1)
			}
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err == io.EOF {
				closed++
			}
			c.Close()
		}
		fmt.Printf("%d of %d connections closed by the daemon\n", closed, times)
		os.Exit(0)
	}
	// late: a spawned rank whose hello comes after a flood of strangers.
	c, err := net.Dial("unix", os.Getenv(EnvSocket))
	if err != nil {
		fmt.Println("dial:", err)
		os.Exit(1)
	}
	fmt.Println("connected")
	time.Sleep(time.Second)
	fmt.Fprintf(c, "{\"rank\":%s}\n", os.Getenv("VIGIL_RANK"))
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	fmt.Printf("answer %q %v\n", line, err)
	time.Sleep(time.Minute) // killed by the daemon's Close
}

// worldCopy copies the test binary into a directory every user can
// traverse and returns its path.
func worldCopy(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "vigil-daemon-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "helper")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// syncBuffer is a log sink for a test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), sub)
}

// TestLocalSocketCaps: the socket is the daemon user's only (mode 0600);
// 1,000 silent connections keep at most 64 waiting (the others closed and
// counted as local_pending_cap); a rank attaches amid them and stays
// attached through 200 more; a connection silent beyond the hello
// time-out is closed and counted; a bad first line is counted; the
// refusals are logged once a second per reason at most.
func TestLocalSocketCaps(t *testing.T) {
	defer func(d time.Duration) { localHelloTimeout = d }(localHelloTimeout)
	localHelloTimeout = 300 * time.Millisecond
	var logs syncBuffer
	sock := filepath.Join(t.TempDir(), "n0.sock")
	d, err := Start(Config{Layout: Layout{Nodes: 1, PPN: 2}, Peers: testnet.FreeAddrs(t, 1), JobID: 7,
		Key: []byte("0123456789abcdef0123456789abcdef"), Socket: sock, KeepHung: true, HangTimeout: 5 * time.Second,
		Config: node.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want 0600", fi.Mode().Perm())
	}
	rejected := func(reason string) uint64 { return d.Stats().Transport.Rejected[reason] }

	dial := func(n int) []net.Conn {
		var cs []net.Conn
		for range n {
			c, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			cs = append(cs, c)
			if p := d.pending.Len(); p > maxLocalPending {
				t.Fatalf("%d connections pending, cap %d", p, maxLocalPending)
			}
		}
		return cs
	}
	cs := dial(1000)
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for rejected(reasonLocalPending) < 1000-maxLocalPending && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if r := rejected(reasonLocalPending); r < 1000-maxLocalPending {
		t.Fatalf("%d connections counted as %s, want ≥ %d", r, reasonLocalPending, 1000-maxLocalPending)
	}
	cl, err := Attach(sock, 0)
	if err != nil {
		t.Fatalf("a rank amid 1,000 silent connections: %v", err)
	}
	cs = append(cs, dial(200)...)
	if err := cl.Close(true); err != nil {
		t.Errorf("the attached rank after 200 more connections: %v", err)
	}

	// Silent beyond the time-out; then a first line that is not a hello.
	for _, c := range cs {
		c.Close()
	}
	cs = nil
	timeouts := rejected(reasonLocalTimeout)
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Errorf("the silent connection: %v, want closed by the daemon", err)
	}
	c.Close()
	if rejected(reasonLocalTimeout) != timeouts+1 {
		t.Errorf("%s: %d, want %d", reasonLocalTimeout, rejected(reasonLocalTimeout), timeouts+1)
	}
	c, err = net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\n")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	ans, _ := io.ReadAll(c)
	c.Close()
	if !strings.Contains(string(ans), `"ok":false`) || rejected(reasonLocalHello) != 1 {
		t.Errorf("bad first line: answer %q, %s = %d, want a refusal counted once", ans, reasonLocalHello, rejected(reasonLocalHello))
	}
	if n := logs.count("local connection refused"); n > 6 {
		t.Errorf("%d log lines of refused connections, want one per second per reason", n)
	}
	t.Logf("refused %v; %d log lines", d.Stats().Transport.Rejected, logs.count("local connection refused"))
}

// TestLocalSocketStrangers: a process of another user (uid 65534) that
// reaches the socket (its mode widened for the test) is closed at once,
// counted as local_wrong_user, with two log lines for 500 connections; and
// a rank the daemon spawned, whose hello comes a second after it
// connected, is admitted though 300 silent connections arrived meanwhile.
func TestLocalSocketStrangers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	bin := worldCopy(t)
	var logs syncBuffer
	dir := filepath.Dir(bin)
	sock := filepath.Join(dir, "n0.sock")
	out, err := os.Create(filepath.Join(dir, "spawned.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	t.Setenv(envLocalHelper, "late")
	d, err := Start(Config{Layout: Layout{Nodes: 1, PPN: 1}, Peers: testnet.FreeAddrs(t, 1), JobID: 7,
		Key: []byte("0123456789abcdef0123456789abcdef"), Socket: sock, KeepHung: true, HangTimeout: 10 * time.Second,
		Spawn: []string{bin, "-test.run=^TestLocalHelper$"}, SpawnOut: out,
		Config: node.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	spawned := func(sub string) bool {
		b, _ := os.ReadFile(out.Name())
		return strings.Contains(string(b), sub)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !spawned("connected") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	var cs []net.Conn
	for range 300 {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cs = append(cs, c)
	}
	for !spawned("answer") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	b, _ := os.ReadFile(out.Name())
	if !strings.Contains(string(b), `\"ok\":true`) {
		t.Errorf("the spawned rank, its hello after 300 silent connections: %s", b)
	}
	if r := d.Stats().Transport.Rejected[reasonLocalPending]; r < uint64(len(cs)-maxLocalPending) {
		t.Errorf("%d evictions counted, want ≥ %d", r, len(cs)-maxLocalPending)
	}

	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	before := logs.count("local connection refused")
	cmd := exec.Command(bin, "-test.run=^TestLocalHelper$")
	cmd.Env = append(os.Environ(), envLocalHelper+"=strangers:500", "VIGIL_TEST_SOCK="+sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	t0 := time.Now()
	o, err := cmd.CombinedOutput()
	took := time.Since(t0)
	if err != nil || !strings.Contains(string(o), "500 of 500 connections closed") {
		t.Fatalf("as uid 65534: %v\n%s", err, o)
	}
	if r := d.Stats().Transport.Rejected[reasonLocalUser]; r != 500 {
		t.Errorf("%d connections counted as %s, want 500", r, reasonLocalUser)
	}
	lines := logs.count("local connection refused") - before
	if max := int(took/time.Second) + 2; lines > max {
		t.Errorf("%d log lines for 500 refusals in %v, want ≤ %d", lines, took, max)
	}
	if _, ok := d.Locals()[ranks.Rank(0)]; !ok {
		t.Error("the spawned rank is no longer a local of the daemon")
	}
	t.Logf("as uid 65534: %s in %v, %d log lines; refused %v", strings.TrimSpace(string(o)), took, lines, d.Stats().Transport.Rejected)
}
