package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
)

// Client is an application process attached to its node's daemon: it
// bumps its heartbeat word every h from a goroutine of its own and
// receives the failures the daemon learns (the outer level of seed 003's
// two-level broadcast).
type Client struct {
	c      *net.UnixConn
	w      *heartbeatWord
	info   welcome
	events chan Event
	// deliver, if set, takes the failures instead of events (AttachFunc).
	deliver func(Event)
	read    chan struct{} // closed when the daemon's side ended
	closed  atomic.Bool   // Close was called
	quit    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

// Attach connects to the daemon's socket at path as rank r. The daemon
// checks that r is one of its hosted ranks, identifies the process by its
// kernel credentials, and answers with a heartbeat word.
func Attach(path string, r ranks.Rank) (*Client, error) { return AttachFunc(path, r, nil) }

// AttachFunc is Attach with the failures handed to deliver (when not nil)
// instead of Events: the goroutine that reads them from the daemon calls
// it, in order, from now on, so it must not block. Events then receives
// nothing and is closed when the connection ends.
func AttachFunc(path string, r ranks.Rank, deliver func(Event)) (*Client, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("daemon: connecting to the node's daemon at %s: %w", path, err)
	}
	fail := func(err error) (*Client, error) {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	b, _ := json.Marshal(hello{Rank: &r})
	if _, err := c.Write(append(b, '\n')); err != nil {
		return fail(fmt.Errorf("daemon: attach: %w", err))
	}
	// The welcome line carries the heartbeat table's fd; it may arrive in
	// pieces, the fd with the first one.
	buf := make([]byte, maxLine)
	oob := make([]byte, unix.CmsgSpace(4))
	var line []byte
	fd := -1
	for !bytes.Contains(line, []byte{'\n'}) {
		n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
		if err != nil {
			return fail(fmt.Errorf("daemon: attach: reading the daemon's answer: %w", err))
		}
		if oobn > 0 && fd < 0 {
			if fd, err = parseFD(oob[:oobn]); err != nil {
				return fail(err)
			}
		}
		line = append(line, buf[:n]...)
		if len(line) > maxLine {
			return fail(errors.New("daemon: attach: answer too long"))
		}
	}
	i := bytes.IndexByte(line, '\n')
	rest := line[i+1:]
	var w welcome
	if err := json.Unmarshal(line[:i], &w); err != nil {
		return fail(fmt.Errorf("daemon: attach: bad answer %q: %w", line[:i], err))
	}
	if !w.OK {
		if fd >= 0 {
			unix.Close(fd)
		}
		return fail(fmt.Errorf("daemon refused rank %d: %s", r, w.Error))
	}
	if fd < 0 {
		return fail(errors.New("daemon: attach: the answer came without the heartbeat table"))
	}
	if w.HeartbeatNs <= 0 {
		unix.Close(fd)
		return fail(fmt.Errorf("daemon: attach: heartbeat period %d ns", w.HeartbeatNs))
	}
	hw, err := mapWord(fd, w.Slot)
	if err != nil {
		return fail(err)
	}
	c.SetDeadline(time.Time{})
	cl := &Client{c: c, w: hw, info: w, events: make(chan Event, 1024), deliver: deliver, read: make(chan struct{}), quit: make(chan struct{})}
	hw.bump()
	cl.wg.Add(2)
	go cl.beat(time.Duration(w.HeartbeatNs))
	go cl.reader(bufio.NewReader(io.MultiReader(bytes.NewReader(rest), c)))
	return cl, nil
}

// parseFD extracts one passed file descriptor.
func parseFD(oob []byte) (int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return -1, fmt.Errorf("daemon: attach: control message: %w", err)
	}
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err == nil && len(fds) > 0 {
			for _, extra := range fds[1:] {
				unix.Close(extra)
			}
			return fds[0], nil
		}
	}
	return -1, errors.New("daemon: attach: no file descriptor in the control message")
}

// Node returns the node hosting this process, and the job's layout.
func (cl *Client) Node() ranks.Rank { return cl.info.Node }

// Layout returns the job's layout as the daemon told it.
func (cl *Client) Layout() Layout { return Layout{Nodes: cl.info.Nodes, PPN: cl.info.PPN} }

// Closed reports whether Close was called (the end of Events is then
// expected, not the daemon's).
func (cl *Client) Closed() bool { return cl.closed.Load() }

// Events returns the failures the daemon reports, past ones first. It is
// closed when the connection ends (daemon gone or Close).
func (cl *Client) Events() <-chan Event { return cl.events }

// beat bumps the heartbeat word every period.
func (cl *Client) beat(period time.Duration) {
	defer cl.wg.Done()
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			cl.w.bump()
		case <-cl.quit:
			return
		}
	}
}

func (cl *Client) reader(br *bufio.Reader) {
	defer cl.wg.Done()
	defer close(cl.read)
	defer close(cl.events)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return
		}
		var ev Event
		if json.Unmarshal(line, &ev) != nil {
			continue
		}
		ev.DeliveredMono = node.Mono()
		if cl.deliver != nil {
			cl.deliver(ev)
			continue
		}
		select {
		case cl.events <- ev:
		case <-cl.quit:
			return
		}
	}
}

// Close detaches. With leave, the daemon is told first that this process
// is departing cleanly, so its end is reported as a departure; Close then
// waits (up to a second) for the daemon to close its side, after which the
// rank may attach again.
func (cl *Client) Close(leave bool) error {
	var err error
	cl.closed.Store(true)
	cl.once.Do(func() {
		if leave {
			cl.c.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err = cl.c.Write([]byte("{\"bye\":true}\n")); err == nil {
				select {
				case <-cl.read:
				case <-time.After(time.Second):
				}
			}
		}
		close(cl.quit)
		cl.c.Close()
		cl.wg.Wait()
		cl.w.close()
	})
	return err
}
