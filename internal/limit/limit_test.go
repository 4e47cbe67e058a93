package limit

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestLogOneLinePerInterval: 10,000 lines of one key in a burst give one
// line; the next one after the interval carries the count of the others;
// another key is not held back.
func TestLogOneLinePerInterval(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	l := NewLog(slog.New(slog.NewTextHandler(writer{&buf, &mu}, nil)), time.Second)
	clock := time.Now()
	l.now = func() time.Time { return clock } // under l.mu
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 2500 {
				l.Log("a", slog.LevelWarn, "refused")
			}
		})
	}
	wg.Wait()
	l.Log("b", slog.LevelWarn, "other")
	l.mu.Lock()
	clock = clock.Add(time.Second)
	l.mu.Unlock()
	l.Log("a", slog.LevelWarn, "refused")
	mu.Lock()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	mu.Unlock()
	if len(lines) != 3 || !strings.Contains(lines[1], "other") || !strings.Contains(lines[2], "suppressed=9999") {
		t.Fatalf("lines %q: want one of a, one of b, then a with suppressed=9999", lines)
	}
	if l.Log("c", slog.LevelDebug, "not enabled") {
		t.Error("a line below the handler's level was logged")
	}
}

type writer struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// failingListener fails its first n Accepts with EMFILE.
type failingListener struct {
	net.Listener
	n     int
	calls []time.Time
}

func (f *failingListener) Accept() (net.Conn, error) {
	f.calls = append(f.calls, time.Now())
	if len(f.calls) <= f.n {
		return nil, &net.OpError{Op: "accept", Err: syscall.EMFILE}
	}
	return f.Listener.Accept()
}

// TestAcceptorBacksOff: an accept loop out of file descriptors retries
// after 5, 10, 20… ms rather than spinning, logs once, and gets the next
// connection once descriptors are back; a closed listener ends it.
func TestAcceptorBacksOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &failingListener{Listener: ln, n: 4}
	var buf bytes.Buffer
	var mu sync.Mutex
	a := Acceptor{Log: NewLog(slog.New(slog.NewTextHandler(writer{&buf, &mu}, nil)), time.Minute), Key: "test"}
	go func() {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			defer c.Close()
			time.Sleep(time.Second)
		}
	}()
	c, err := a.Accept(f)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if len(f.calls) != 5 {
		t.Fatalf("%d calls, want 5", len(f.calls))
	}
	if took := f.calls[4].Sub(f.calls[0]); took < (5+10+20+40)*time.Millisecond {
		t.Errorf("4 failures retried within %v, want the back-off (75 ms)", took)
	}
	if n := strings.Count(buf.String(), "accept failed"); n != 1 {
		t.Errorf("%d log lines for 4 failures, want 1", n)
	}
	ln.Close()
	if _, err := a.Accept(f); !errors.Is(err, net.ErrClosed) {
		t.Errorf("closed listener: %v", err)
	}
}

// TestCapClosesBeyondMax: with 3 connections open, a fourth is closed at
// once and counted; closing one makes room.
func TestCapClosesBeyondMax(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	capped := Cap(ln, 3)
	defer capped.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := capped.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	var clients []net.Conn
	for range 4 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	var held []net.Conn
	for range 3 {
		held = append(held, <-accepted)
	}
	_ = clients[3].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := clients[3].Read(make([]byte, 1)); err == nil {
		t.Fatal("the fourth connection was not closed")
	}
	if capped.Refused() != 1 || capped.Open() != 3 {
		t.Fatalf("refused %d, open %d; want 1 and 3", capped.Refused(), capped.Open())
	}
	held[0].Close()
	held[0].Close() // twice: released once
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case a := <-accepted:
		defer a.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("no room after a close")
	}
	if capped.Open() != 3 {
		t.Errorf("open %d, want 3", capped.Open())
	}
}

// TestPendingEvictsTheOldest: beyond 3 pending connections the oldest is
// evicted and counted; a connection done (identified) leaves room, and
// Done reports false for an evicted one.
func TestPendingEvictsTheOldest(t *testing.T) {
	p := NewPending(3)
	var cs []net.Conn
	for range 5 {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		cs = append(cs, a)
	}
	for i := range 3 {
		if ev := p.Add(cs[i]); ev != nil {
			t.Fatalf("connection %d evicted one below the cap", i)
		}
	}
	if ev := p.Add(cs[3]); ev != cs[0] {
		t.Fatalf("evicted %v, want the oldest", ev)
	}
	if p.Done(cs[0]) {
		t.Error("Done true for an evicted connection")
	}
	if !p.Done(cs[1]) || p.Len() != 2 {
		t.Errorf("Done(1) false or %d pending, want 2", p.Len())
	}
	if ev := p.Add(cs[4]); ev != nil {
		t.Error("evicted one with room left")
	}
	if p.Len() != 3 || p.Evicted() != 1 {
		t.Errorf("%d pending, %d evicted; want 3 and 1", p.Len(), p.Evicted())
	}
}
