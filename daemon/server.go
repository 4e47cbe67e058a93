package daemon

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/internal/limit"
	"github.com/vigil-hpc/vigil/internal/unixcred"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/settings"
)

// EnvSocket names the environment variable that gives local processes the
// path of their daemon's Unix socket.
const EnvSocket = settings.DaemonSocketEnv

// The local protocol, JSON lines over a Unix stream socket:
//
//	process → daemon  {"rank":R}                 (first line: attach as rank R)
//	daemon → process  {"ok":true,"slot":S,...}   (with the heartbeat table's fd, SCM_RIGHTS)
//	                  or {"ok":false,"error":"..."} and close
//	daemon → process  Event lines, past failures first
//	process → daemon  {"bye":true}               (clean departure follows; the
//	                                              daemon detaches it, then closes)
//
// The process's pid is the kernel's (SO_PEERCRED), not a claim.

// hello is the first line of a process.
type hello struct {
	Rank *ranks.Rank `json:"rank"`
	Bye  bool        `json:"bye"`
}

// welcome is the daemon's answer to hello.
type welcome struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// Slot is the process's word in the heartbeat table, HeartbeatNs how
	// often to bump it.
	Slot        int        `json:"slot"`
	HeartbeatNs int64      `json:"heartbeat_ns"`
	Node        ranks.Rank `json:"node"`
	Nodes       int        `json:"nodes"`
	PPN         int        `json:"ppn"`
}

// maxLine bounds a line from a local process.
const maxLine = 4096

// Bounds of the local socket. A connection must send its first line
// within localHelloTimeout; at most maxLocalPending connections without
// one are kept (the oldest is closed beyond), except those of the
// daemon's own children, which are never evicted. Attached connections
// are bounded by the ranks the daemon hosts (one each).
const maxLocalPending = 64

// localHelloTimeout is a variable for the tests.
var localHelloTimeout = 10 * time.Second

// Reasons a local connection is refused, counted in Stats (the metrics'
// vigil_frames_rejected_total) and logged once a second at most.
const (
	reasonLocalUser    = "local_wrong_user"    // a peer of another uid
	reasonLocalPending = "local_pending_cap"   // evicted: maxLocalPending without a first line
	reasonLocalTimeout = "local_hello_timeout" // no first line within localHelloTimeout
	reasonLocalHello   = "local_bad_hello"     // a first line that is not a hello
)

// clientConn is one attached process's connection; a writer goroutine
// (started once the welcome is written) drains out, so the daemon's loop
// never blocks on a stopped process. Events beyond out's capacity (256)
// disconnect the process.
type clientConn struct {
	c    *net.UnixConn
	pid  int
	out  chan []byte
	once sync.Once
	done chan struct{}
}

func newClientConn(c *net.UnixConn, pid int) *clientConn {
	return &clientConn{c: c, pid: pid, out: make(chan []byte, 256), done: make(chan struct{})}
}

func (cc *clientConn) writer() {
	for {
		select {
		case b := <-cc.out:
			cc.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := cc.c.Write(b); err != nil {
				cc.close()
				return
			}
		case <-cc.done:
			return
		}
	}
}

// send queues one event line; a process that does not read its events is
// disconnected rather than let the daemon wait.
func (cc *clientConn) send(ev Event) {
	b, _ := json.Marshal(ev)
	select {
	case cc.out <- append(b, '\n'):
	default:
		cc.close()
	}
}

func (cc *clientConn) close() {
	cc.once.Do(func() {
		close(cc.done)
		cc.c.Close()
	})
}

// attachReq asks the daemon's loop to attach a process.
type attachReq struct {
	rank  ranks.Rank
	cc    *clientConn
	reply chan welcome
}

// detachReq tells the loop that a process said goodbye (bye) or closed its
// connection.
type detachReq struct {
	rank ranks.Rank
	cc   *clientConn
	bye  bool
}

// listenLocal creates the daemon's Unix socket at path, replacing a stale
// socket file (but no other kind of file), readable and writable by the
// daemon's user only (connecting needs write permission).
func listenLocal(path string) (*net.UnixListener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("daemon: %s exists and is not a socket", path)
		}
		os.Remove(path)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("daemon: listening on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("daemon: %s: %w", path, err)
	}
	return ln, nil
}

// serveLocal accepts local processes until ln is closed. A peer of
// another user is closed at once, without a goroutine; the others wait for
// their first line under the pending cap (maxLocalPending), the daemon's
// children exempt.
func (d *Daemon) serveLocal(ln *net.UnixListener) {
	defer d.wg.Done()
	// Out of file descriptors: back off and log (once a second at most)
	// rather than stop serving.
	acc := limit.Acceptor{Log: d.logs, Key: "daemon: local socket", Stop: d.quit}
	uid := uint32(os.Geteuid())
	for {
		conn, err := acc.Accept(ln)
		if err != nil {
			return
		}
		c := conn.(*net.UnixConn)
		cred, err := unixcred.Peer(c)
		if err == nil && cred.Uid != uid {
			err = fmt.Errorf("peer pid %d runs as uid %d, not %d", cred.Pid, cred.Uid, uid)
		}
		if err != nil {
			c.Close()
			d.refuseLocal(reasonLocalUser, err)
			continue
		}
		pid := int(cred.Pid)
		pending := !d.isChild(pid)
		if pending {
			if ev := d.pending.Add(c); ev != nil {
				ev.Close() // its serveConn ends
				d.refuseLocal(reasonLocalPending, fmt.Errorf("%d connections without a first line: closed the oldest", maxLocalPending))
			}
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.serveConn(c, pid, pending)
		}()
	}
}

// isChild reports whether pid is a process the daemon started.
func (d *Daemon) isChild(pid int) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.children[pid]
}

// refuseLocal counts a refused local connection and logs it, once a
// second per reason at most.
func (d *Daemon) refuseLocal(reason string, err error) {
	d.mu.Lock()
	d.refused[reason]++
	d.mu.Unlock()
	d.logs.Log(reason, slog.LevelWarn, "daemon: local connection refused", "reason", reason, "err", err)
}

// serveConn runs one local process's connection, from process pid;
// pending: it is under the pending cap until its first line.
func (d *Daemon) serveConn(c *net.UnixConn, pid int, pending bool) {
	d.mu.Lock()
	if d.closing {
		d.mu.Unlock()
		c.Close()
		return
	}
	d.conns[c] = struct{}{}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.conns, c)
		d.mu.Unlock()
		c.Close()
	}()
	br := bufio.NewReaderSize(c, maxLine)
	c.SetReadDeadline(time.Now().Add(localHelloTimeout))
	var h hello
	err := readLine(br, &h)
	if pending && !d.pending.Done(c) {
		return // evicted, and counted
	}
	if err != nil || h.Rank == nil {
		var ne net.Error
		switch {
		case err == nil:
			err = errors.New(`first line has no "rank"`)
			d.refuseLocal(reasonLocalHello, err)
		case errors.As(err, &ne) && ne.Timeout():
			d.refuseLocal(reasonLocalTimeout, err)
		case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed):
		default:
			d.refuseLocal(reasonLocalHello, err)
		}
		writeWelcome(c, welcome{Error: "bad hello: " + err.Error()}, -1)
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	cc := newClientConn(c, pid)
	req := attachReq{rank: *h.Rank, cc: cc, reply: make(chan welcome, 1)}
	select {
	case d.attach <- req:
	case <-d.quit:
		cc.close()
		return
	}
	w := <-req.reply
	if !w.OK {
		writeWelcome(c, w, -1)
		cc.close()
		return
	}
	// The welcome precedes every event: the loop has queued the past
	// events already, and the writer starts only now.
	if err := writeWelcome(c, w, int(d.table.File().Fd())); err != nil {
		cc.close()
	} else {
		go cc.writer()
	}
	bye := false
	for !bye {
		var m hello
		if err := readLine(br, &m); err != nil {
			break
		}
		bye = m.Bye
	}
	// The loop forgets the connection before it is closed: a process that
	// said goodbye and waits for the close may attach again at once.
	select {
	case d.detach <- detachReq{rank: *h.Rank, cc: cc, bye: bye}:
	case <-d.quit:
	}
	cc.close()
}

func readLine(br *bufio.Reader, v any) error {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return err
	}
	return json.Unmarshal(line, v)
}

// writeWelcome writes w, with the table's fd when fd ≥ 0.
func writeWelcome(c *net.UnixConn, w welcome, fd int) error {
	b, _ := json.Marshal(w)
	b = append(b, '\n')
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	defer c.SetWriteDeadline(time.Time{})
	if fd < 0 {
		_, err := c.Write(b)
		return err
	}
	_, _, err := c.WriteMsgUnix(b, unix.UnixRights(fd), nil)
	return err
}
