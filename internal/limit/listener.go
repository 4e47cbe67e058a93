package limit

import (
	"net"
	"sync"
	"sync/atomic"
)

// Listener caps the connections of a net.Listener open at once: when Max
// are open, a new connection is closed as soon as it is accepted (and
// counted in Refused), so that neither its file descriptor nor a
// goroutine for it lingers. A connection Accept returned counts until it
// is closed.
type Listener struct {
	net.Listener
	sem     chan struct{}
	refused atomic.Uint64
}

// Cap wraps ln so that at most max connections are open at once.
func Cap(ln net.Listener, max int) *Listener {
	return &Listener{Listener: ln, sem: make(chan struct{}, max)}
}

// Accept returns the next connection under the cap.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.sem <- struct{}{}:
			return &conn{Conn: c, release: func() { <-l.sem }}, nil
		default:
			l.refused.Add(1)
			c.Close()
		}
	}
}

// Open is the number of connections open.
func (l *Listener) Open() int { return len(l.sem) }

// Refused is the number of connections closed at once for the cap.
func (l *Listener) Refused() uint64 { return l.refused.Load() }

// conn releases its place under the cap once closed.
type conn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
