package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/lab/hostile"
	"github.com/vigil-hpc/vigil/launch"
	"github.com/vigil-hpc/vigil/node"
)

// The hostile-input checks of issue #30's resource caps, against running
// agents on loopback: an outsider on the host (no key) connects to the
// ports and sockets an agent listens on. Each check is bounded (seconds)
// and asserts the caps: memory, file descriptors, log lines, and no live
// rank reported dead.

// lineCounter counts an agents' stderr lines, and those with each of some
// substrings, and passes them to the test log.
type lineCounter struct {
	t    *testing.T
	mu   sync.Mutex
	buf  []byte
	all  int
	with map[string]int
}

func (c *lineCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = append(c.buf, p...)
	for {
		i := bytes.IndexByte(c.buf, '\n')
		if i < 0 {
			break
		}
		line := string(c.buf[:i])
		c.buf = c.buf[i+1:]
		c.all++
		for k := range c.with {
			if strings.Contains(line, k) {
				c.with[k]++
			}
		}
		if c.all <= 200 {
			c.t.Logf("agent: %s", line)
		}
	}
	return len(p), nil
}

func (c *lineCounter) count(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.with[k]
}

// procStatus returns a field of /proc/pid/status in kB (VmRSS).
func procStatus(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			kb, _ := strconv.Atoi(strings.Fields(v)[0])
			return kb
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// fdCount is the number of file descriptors pid has open.
func fdCount(t *testing.T, pid int) int {
	t.Helper()
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// openFilesLimit returns pid's soft and hard RLIMIT_NOFILE.
func openFilesLimit(t *testing.T, pid int) (soft, hard string) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Max open files") {
			f := strings.Fields(l)
			return f[3], f[4]
		}
	}
	t.Fatalf("no open files limit for %d", pid)
	return "", ""
}

// strangerFrameHeader forges the header of a frame of job (its ID is not
// secret) announcing a payload of n bytes.
func strangerFrameHeader(job uint64, n uint32) []byte {
	h := make([]byte, wire.HeaderSize)
	h[0], h[1], h[2], h[3] = 'V', 'G', wire.Version, byte(wire.Msg)
	binary.LittleEndian.PutUint64(h[4:], job)
	binary.LittleEndian.PutUint32(h[12:], 1)
	binary.LittleEndian.PutUint64(h[16:], 1)
	binary.LittleEndian.PutUint32(h[24:], n)
	return h
}

// dialMany opens n TCP connections to addr, sends each first (if any) and
// returns them.
func dialMany(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	var cs []net.Conn
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			for _, c := range cs {
				c.Close()
			}
			t.Fatalf("connection %d to %s: %v", i, addr, err)
		}
		cs = append(cs, c)
	}
	return cs
}

// closedByPeer counts the connections the other end has closed (a read
// returns EOF or a reset within wait).
func closedByPeer(cs []net.Conn, wait time.Duration) int {
	deadline := time.Now().Add(wait)
	n := 0
	buf := make([]byte, 64)
	for _, c := range cs {
		_ = c.SetReadDeadline(deadline)
		for {
			_, err := c.Read(buf)
			if err == nil {
				continue // a challenge, an HTTP error
			}
			if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
				n++
			}
			break
		}
	}
	return n
}

// TestE2EHostileResourceCaps: four agents with metrics endpoints. An
// outsider (a) opens 100 connections to rank 0's port, each announcing a
// 1 MiB frame and sending 1 MiB: the agent's RSS grows by less than
// 16 MB (it grew by 136 MB before the cap); (b) opens 1,200 idle
// connections to rank 1's metrics endpoint: its file descriptors stay
// within 32 of the start, every connection is closed within the header
// time-out (2 s, 4 s allowed), and a scrape then works; (c) opens 1,200
// idle connections to rank 2's port: its file descriptors stay within 64
// (the cap on connections without a Hello); (d) as another user, connects
// 2,000 times to rank 3's shared-memory socket: at most one WARN line per
// second; and cannot open rank 3's environment (the job key), memory or
// file descriptors (the region's memfd) under /proc. The agents' soft limit on open files, lowered to 4096 for them,
// is raised to the hard limit; the rejected frames are logged once per
// second per reason at most; no live rank is reported dead.
func TestE2EHostileResourceCaps(t *testing.T) {
	const n = 4
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = min(4096, lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	lc := &lineCounter{t: t, with: map[string]int{"frame rejected": 0, "not sharing the slot array": 0, "suppressed": 0}}
	start := time.Now()
	job, err := launch.Start(n, []string{vigilBin, "agent", "-h", "10ms", "-delta", "200ms", "-metrics-addr", "127.0.0.1:0",
		"-log-level", "warn"}, launch.Options{Stderr: lc})
	restore := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	if err != nil {
		t.Fatal(err)
	}
	if restore != nil {
		t.Fatal(restore)
	}
	j := awaitReady(t, job)
	ready := job.Ready()
	pid := func(r int) int { return job.Procs[r].Cmd.Process.Pid }
	for r := range n {
		// The Go runtime raises the soft limit to the hard one less one
		// (syscall's init), which the agent keeps.
		if soft, hard := openFilesLimit(t, pid(r)); soft != hard && soft != strconv.FormatUint(lim.Max-1, 10) {
			t.Errorf("rank %d: open files limit soft %s, hard %s: want the soft limit raised to the hard one", r, soft, hard)
		}
	}
	time.Sleep(500 * time.Millisecond) // settled

	// (a) 100 connections announcing 1 MiB frames.
	job0, err := jobID(pid(0))
	if err != nil {
		t.Fatal(err)
	}
	rss0 := procStatus(t, pid(0), "VmRSS")
	cs := dialMany(t, ready[0].Addr, 100)
	payload := make([]byte, 1<<20)
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			c.Write(strangerFrameHeader(job0, 1<<20))
			c.Write(payload[:len(payload)-1])
		})
	}
	wg.Wait()
	rssPeak := procStatus(t, pid(0), "VmRSS")
	closed := closedByPeer(cs, 3*time.Second)
	for _, c := range cs {
		c.Close()
	}
	t.Logf("(a) 100 connections announcing 1 MiB frames: rank 0's RSS %d kB before, %d kB after; %d of 100 closed by the agent",
		rss0, rssPeak, closed)
	if grew := rssPeak - rss0; grew > 16<<10 {
		t.Errorf("(a) RSS grew by %d kB, want < 16 MB", grew)
	}
	if closed != 100 {
		t.Errorf("(a) %d of 100 connections closed by the agent, want all", closed)
	}

	// (b) 1,200 idle connections to the metrics endpoint.
	fd1 := fdCount(t, pid(1))
	cs = dialMany(t, ready[1].Metrics, 1200)
	time.Sleep(200 * time.Millisecond)
	fdPeak := fdCount(t, pid(1))
	t0 := time.Now()
	closed = closedByPeer(cs, 4*time.Second)
	took := time.Since(t0)
	for _, c := range cs {
		c.Close()
	}
	t.Logf("(b) 1200 idle connections to the metrics endpoint: rank 1 had %d fds, %d with them open; %d closed by the agent within %v",
		fd1, fdPeak, closed, took.Round(time.Millisecond))
	if fdPeak > fd1+metricsMaxConns+4 {
		t.Errorf("(b) %d fds with the connections open, %d before: want at most %d more", fdPeak, fd1, metricsMaxConns+4)
	}
	if closed != len(cs) {
		t.Errorf("(b) %d of %d idle connections closed within 4 s, want all", closed, len(cs))
	}
	m := scrape(t, ready[1].Metrics)
	if m["vigil_heartbeats_sent_total"] == 0 {
		t.Errorf("(b) scrape after the flood: %v", m)
	}
	if r := m["vigil_metrics_connections_refused_total"]; r < float64(len(cs)-metricsMaxConns) {
		t.Errorf("(b) %v connections counted as refused, want at least %d", r, len(cs)-metricsMaxConns)
	}

	// (c) 1,200 idle connections to rank 2's message port, counted.
	fd2 := fdCount(t, pid(2))
	cs = dialMany(t, ready[2].Addr, 1200)
	time.Sleep(300 * time.Millisecond)
	fdPeak = fdCount(t, pid(2))
	for _, c := range cs {
		c.Close()
	}
	m = scrape(t, ready[2].Metrics)
	t.Logf("(c) 1200 idle connections to rank 2's port: %d fds before, %d with them open; %v counted as pending_cap", fd2, fdPeak,
		m[`vigil_frames_rejected_total{reason="pending_cap"}`])
	if m[`vigil_frames_rejected_total{reason="pending_cap"}`] < 1200-64 {
		t.Errorf("(c) %v connections counted as pending_cap, want at least %d", m[`vigil_frames_rejected_total{reason="pending_cap"}`], 1200-64)
	}
	if fdPeak > fd2+64+4 {
		t.Errorf("(c) %d fds with the connections open, %d before: want at most 68 more (64 without Hello)", fdPeak, fd2)
	}

	// (d) another user at rank 3's shared-memory socket.
	if os.Geteuid() == 0 {
		sock, err := shmSocketOf(pid(3))
		if err != nil {
			t.Fatal(err)
		}
		bin := copyForAll(t, os.Args[0])
		connect := func(times int) {
			cmd := exec.Command(bin)
			cmd.Env = append(os.Environ(), envShmConnect+"="+sock+","+strconv.Itoa(times)+","+strconv.Itoa(pid(3)))
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("(d) connecting as uid 65534: %v\n%s", err, out)
			}
			t.Logf("(d) as uid 65534: %s", strings.TrimSpace(string(out)))
		}
		connect(2000)
		time.Sleep(1100 * time.Millisecond)
		connect(1) // its line carries the count of the lines suppressed
	} else {
		t.Log("(d) not root: no other user to connect to the shared-memory socket as")
	}

	time.Sleep(300 * time.Millisecond)
	j.checkAccuracy(nil)
	secs := int(time.Since(start).Seconds()) + 1
	rejected, refused, all := lc.count("frame rejected"), lc.count("not sharing the slot array"), lc.all
	t.Logf("stderr over %d s: %d lines, %d of rejected frames, %d of refused shared-memory connections, %d with a suppressed count",
		secs, all, rejected, refused, lc.count("suppressed"))
	// One line per second per reason and rank at most: too_large and
	// pending_cap (rank 0, 2), hello_timeout.
	if rejected > 3*secs {
		t.Errorf("%d lines of rejected frames in %d s, want one per second per reason at most", rejected, secs)
	}
	if refused > secs {
		t.Errorf("%d lines of refused connections in %d s, want one per second at most", refused, secs)
	}
	if os.Geteuid() == 0 && (refused == 0 || lc.count("suppressed") == 0) {
		t.Errorf("%d lines of refused connections, %d with a suppressed count: want the refusals logged, counted", refused, lc.count("suppressed"))
	}
}

// copyForAll copies the executable at path into a directory every user
// can read, and returns the copy's path.
func copyForAll(t *testing.T, path string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := dir + "/shmconnect"
	if err := os.WriteFile(out, b, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := dir; d != "/" && d != "."; d = d[:strings.LastIndexByte(d, '/')] {
		if d == os.TempDir() {
			break
		}
		os.Chmod(d, 0o755) // t.TempDir's parents
	}
	return out
}

// envShmConnect names the shared-memory socket the test binary, run again
// as another user, connects to (shmConnectMain), and the agent's pid.
const envShmConnect = "VIGIL_TEST_SHM_CONNECT"

// shmConnectMain connects to the abstract socket named by
// $VIGIL_TEST_SHM_CONNECT ("name,times,pid") and says how many connections
// the agent took; then it tries the other ways to the agent's memory and
// key, its file descriptors (the region's memfd among them) and its
// environment under /proc, and exits 2 if one opens.
func shmConnectMain() {
	f := strings.Split(os.Getenv(envShmConnect), ",")
	name, n := f[0], f[1]
	times, _ := strconv.Atoi(n)
	if len(f) > 2 {
		var opened []string
		paths := []string{"/proc/" + f[2] + "/environ", "/proc/" + f[2] + "/mem"}
		for fd := range 64 {
			paths = append(paths, fmt.Sprintf("/proc/%s/fd/%d", f[2], fd))
		}
		for _, p := range paths {
			if fh, err := os.OpenFile(p, os.O_RDWR, 0); err == nil || !errors.Is(err, os.ErrPermission) && !errors.Is(err, os.ErrNotExist) {
				opened = append(opened, fmt.Sprintf("%s (%v)", p, err))
				if err == nil {
					fh.Close()
				}
			} else if fh, err := os.Open(p); err == nil {
				opened = append(opened, p+" (read)")
				fh.Close()
			}
		}
		if len(opened) > 0 {
			fmt.Printf("opened as another user: %v\n", opened)
			os.Exit(2)
		}
		fmt.Printf("%d paths under /proc/%s (environ, mem, fd/0-63) refused\n", len(paths), f[2])
	}
	ok := 0
	for range times {
		c, err := net.Dial("unix", name)
		if err != nil {
			continue
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		io.Copy(io.Discard, c) // until the agent closes it
		c.Close()
		ok++
	}
	fmt.Printf("%d of %d connections to %s accepted and closed by the agent\n", ok, times, name)
	if ok == 0 {
		os.Exit(1)
	}
	os.Exit(0)
}

// shmSocketOf finds the shared-memory socket agent pid listens on, as an
// outsider does: its socket inodes, looked up in /proc/net/unix.
func shmSocketOf(pid int) (string, error) {
	inodes := map[string]bool{}
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return "", err
	}
	for _, e := range es {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
		if ino, ok := strings.CutPrefix(l, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/net/unix", pid)) // its network namespace's
	if err != nil {
		return "", err
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		fs := strings.Fields(sc.Text())
		if len(fs) == 8 && inodes[fs[6]] && strings.HasPrefix(fs[7], "@vigil-shm/") {
			return fs[7], nil
		}
	}
	return "", fmt.Errorf("no vigil-shm socket of pid %d in /proc/net/unix", pid)
}

// jobID is agent pid's job ID, as an outsider reads it from the name of
// its shared-memory socket.
func jobID(pid int) (uint64, error) {
	s, err := shmSocketOf(pid)
	if err != nil {
		return 0, err
	}
	f := strings.Split(s, "/")
	return strconv.ParseUint(f[1], 16, 64)
}

// TestE2ERunEndsOnSIGTERM: `vigil run` ends, its agents with it, within a
// second of SIGTERM, once the job is up and during its start-up.
func TestE2ERunEndsOnSIGTERM(t *testing.T) {
	for _, up := range []bool{true, false} {
		cmd := exec.Command(vigilBin, "run", "-n", "4", "-t", "60s")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out := startPiped(t, cmd)
		if up {
			sc := bufio.NewScanner(out)
			for sc.Scan() && !strings.Contains(sc.Text(), "ranks up") {
			}
		} else {
			time.Sleep(20 * time.Millisecond) // the agents are starting
			go io.Copy(io.Discard, out)
		}
		t0 := time.Now()
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			took := time.Since(t0)
			t.Logf("job up %v: vigil run ended %v after SIGTERM (%v)", up, took.Round(time.Millisecond), err)
			if took > time.Second {
				t.Errorf("job up %v: vigil run took %v to end after SIGTERM, want < 1 s", up, took)
			}
		case <-time.After(5 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			t.Fatalf("job up %v: vigil run still running 5 s after SIGTERM", up)
		}
		// Its agents (same process group) are gone too.
		time.Sleep(100 * time.Millisecond)
		if err := syscall.Kill(-cmd.Process.Pid, 0); err == nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Errorf("job up %v: processes of vigil run's group still alive after it ended", up)
		}
	}
}

// TestE2EHostileFdExhaustion: an agent whose open-files limit leaves it 8
// spare descriptors gets 200 connections at its message port and 200 at
// its metrics endpoint: its accept loops run out of descriptors (EMFILE)
// and back off, logging at most a line a second each (it used to log
// "too many open files" millions of times a minute), no live rank is
// reported dead, and once the connections are gone the endpoint answers
// again.
func TestE2EHostileFdExhaustion(t *testing.T) {
	const n = 3
	lc := &lineCounter{t: t, with: map[string]int{"accept": 0, "too many open files": 0}}
	start := time.Now()
	job, err := launch.Start(n, []string{vigilBin, "agent", "-h", "10ms", "-delta", "200ms", "-metrics-addr", "127.0.0.1:0"},
		launch.Options{Stderr: lc})
	if err != nil {
		t.Fatal(err)
	}
	j := awaitReady(t, job)
	ready := job.Ready()
	pid := job.Procs[1].Cmd.Process.Pid
	time.Sleep(300 * time.Millisecond)
	fds := fdCount(t, pid)
	lim := unix.Rlimit{Cur: uint64(fds + 8), Max: uint64(fds + 8)}
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &lim, nil); err != nil {
		t.Fatalf("prlimit: %v", err)
	}
	cs := append(dialMany(t, ready[1].Addr, 200), dialMany(t, ready[1].Metrics, 200)...)
	time.Sleep(2 * time.Second) // out of descriptors meanwhile
	peak := fdCount(t, pid)
	for _, c := range cs {
		c.Close()
	}
	time.Sleep(1500 * time.Millisecond) // the back-off ends (at most 1 s), the strangers' sockets are accepted and closed
	if m := scrape(t, ready[1].Metrics); m["vigil_heartbeats_sent_total"] == 0 {
		t.Errorf("scrape after the exhaustion: %v", m)
	}
	j.checkAccuracy(nil)
	secs := int(time.Since(start).Seconds()) + 1
	t.Logf("limit %d descriptors, %d open at the peak; stderr over %d s: %d lines, %d about accept, %d about too many open files",
		fds+8, peak, secs, lc.all, lc.count("accept"), lc.count("too many open files"))
	if lc.count("too many open files") == 0 {
		t.Errorf("no line about the exhaustion: the accept loops did not run out of descriptors")
	}
	if got := lc.count("too many open files"); got > 2*secs {
		t.Errorf("%d lines about too many open files in %d s, want at most one a second per accept loop", got, secs)
	}
}

// TestE2EForgedHeaderFlood: an attacker who sees the job's frames (root on
// the host: a capture on the loopback device) floods agent 1, over
// -heartbeat udp (h = 10 ms, δ = 100 ms), with copies of a heartbeat of
// agent 0 to it, from agent 0's forged address, tag broken. The copies
// pass the watched lane's filter and fill it faster than the check drains
// it, dropping agent 0's heartbeats with them. For 2 s nobody may be
// reported: agent 1 asks agent 0 for signs of life over TCP instead
// (vigil_lane_probes_total). Agent 0 is then killed, the flood going on:
// agent 1 must report it within 2δ (the guard's bound is δ + δ/4 and a
// check), and no one else may be reported.
func TestE2EForgedHeaderFlood(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs CAP_NET_RAW to capture and forge datagrams")
	}
	const delta = 100 * time.Millisecond
	j := startJob(t, 4, "-h", "10ms", "-delta", delta.String(), "-heartbeat", "udp", "-metrics-addr", "127.0.0.1:0")
	ready := j.job.Ready()
	src, err := netip.ParseAddrPort(ready[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := netip.ParseAddrPort(ready[1].Addr)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second + 2*delta) // past the start grace
	capt, err := hostile.StartCapture("lo", src)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	var copies [][]byte
	for _, b := range capt.Stop() {
		if len(b) == wire.HeartbeatFrameSize && b[3] == byte(wire.Heartbeat) && binary.LittleEndian.Uint32(b[wire.HeaderSize:]) == 1 {
			b[len(b)-1] ^= 1
			for range 64 {
				copies = append(copies, b)
			}
			break
		}
	}
	if copies == nil {
		t.Fatal("no heartbeat of agent 0 to agent 1 captured")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	flooded := make(chan uint64, 1)
	go func() {
		sent, _, _ := hostile.SpoofFlood(ctx, src, dst, copies, 0)
		flooded <- sent
	}()
	time.Sleep(2 * time.Second)
	j.checkAccuracy(nil)
	m := scrape(t, ready[1].Metrics)
	t.Logf("2 s of copies: agent 1 sent %v lane probes, refused %v (bad_tag), the kernel dropped %v",
		m["vigil_lane_probes_total"], m[`vigil_frames_rejected_total{reason="bad_tag"}`], m["vigil_heartbeat_datagrams_kernel_dropped_total"])
	if m["vigil_lane_probes_total"] == 0 || m["vigil_heartbeat_datagrams_kernel_dropped_total"] == 0 {
		t.Fatalf("the flood did not fill agent 1's lane, or agent 1 did not probe: %v", m)
	}
	t0 := node.Mono()
	j.kill(0)
	j.waitComplete(4, map[uint32]bool{0: true}, 10*time.Second)
	at := time.Duration(j.deadReports()[0][1].DeliveredMono - t0)
	cancel()
	t.Logf("agent 0 killed amid the copies (%d sent in all): agent 1 reported it after %v", <-flooded, at.Round(100*time.Microsecond))
	if at > 2*delta {
		t.Errorf("agent 0 reported %v after its kill, want at most 2δ = %v", at, 2*delta)
	}
}
