package daemon

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
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
// socket file (but no other kind of file).
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
	return ln, nil
}

// peerPID returns the pid of the process at the other end of c.
func peerPID(c *net.UnixConn) (int, error) {
	cred, err := unixcred.Peer(c)
	if err != nil {
		return 0, err
	}
	return int(cred.Pid), nil
}

// serveLocal accepts local processes until ln is closed.
func (d *Daemon) serveLocal(ln *net.UnixListener) {
	defer d.wg.Done()
	// Out of file descriptors: back off and log (once a second at most)
	// rather than stop serving.
	acc := limit.Acceptor{Log: limit.NewLog(d.log, time.Second), Key: "daemon: local socket", Stop: d.quit}
	for {
		conn, err := acc.Accept(ln)
		if err != nil {
			return
		}
		c := conn.(*net.UnixConn)
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.serveConn(c)
		}()
	}
}

// serveConn runs one local process's connection.
func (d *Daemon) serveConn(c *net.UnixConn) {
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
	pid, err := peerPID(c)
	if err != nil {
		c.Close()
		return
	}
	br := bufio.NewReaderSize(c, maxLine)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var h hello
	if err := readLine(br, &h); err != nil || h.Rank == nil {
		if err == nil {
			err = errors.New(`first line has no "rank"`)
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
