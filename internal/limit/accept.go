package limit

import (
	"errors"
	"log/slog"
	"net"
	"time"
)

// Accept back-off bounds: the first wait, doubled after each failure in a
// row up to the last.
const (
	MinBackoff = 5 * time.Millisecond
	MaxBackoff = time.Second
)

// Acceptor runs an accept loop's calls to Accept: a failure other than a
// closed listener (out of file descriptors, out of memory) is logged
// through Log (rate-limited, under key) and retried after a back-off, so
// that the loop neither spins nor stops accepting for good.
type Acceptor struct {
	Log  *Log
	Key  string // the log's key and message
	Stop <-chan struct{}
	wait time.Duration
}

// Accept returns the next connection from ln, or ln's error once ln is
// closed or Stop is closed.
func (a *Acceptor) Accept(ln net.Listener) (net.Conn, error) {
	for {
		c, err := ln.Accept()
		if err == nil {
			a.wait = 0
			return c, nil
		}
		if errors.Is(err, net.ErrClosed) {
			return nil, err
		}
		a.wait = min(max(2*a.wait, MinBackoff), MaxBackoff)
		if a.Log != nil {
			a.Log.Log(a.Key, slog.LevelError, a.Key+": accept failed; retrying", "err", err, "retry_in", a.wait)
		}
		t := time.NewTimer(a.wait)
		select {
		case <-t.C:
		case <-a.Stop:
			t.Stop()
			return nil, err
		}
	}
}
