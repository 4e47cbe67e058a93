package limit

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultInterval is Log's interval when none is given.
const DefaultInterval = time.Second

// Log rate-limits log lines by key (a reason): at most one line per key
// per interval; the next line of the key carries "suppressed", the number
// of lines dropped since the last one. It is safe for concurrent use; the
// zero value is not usable: use NewLog.
type Log struct {
	l     *slog.Logger
	every time.Duration
	now   func() time.Time // time.Now; tests move it

	mu    sync.Mutex
	last  map[string]time.Time
	muted map[string]uint64
}

// NewLog returns a Log writing to l (nil: discarded) at most once per
// every (0: DefaultInterval) per key.
func NewLog(l *slog.Logger, every time.Duration) *Log {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	if every <= 0 {
		every = DefaultInterval
	}
	return &Log{l: l, every: every, now: time.Now, last: map[string]time.Time{}, muted: map[string]uint64{}}
}

// Log logs msg with args at level unless a line of key was logged less
// than the interval ago; it reports whether it logged.
func (g *Log) Log(key string, level slog.Level, msg string, args ...any) bool {
	if !g.l.Enabled(context.Background(), level) {
		return false
	}
	g.mu.Lock()
	now := g.now()
	if last, ok := g.last[key]; ok && now.Sub(last) < g.every {
		g.muted[key]++
		g.mu.Unlock()
		return false
	}
	if len(g.last) > maxKeys { // keys come from a fixed set of reasons; never grow without bound
		clear(g.last)
	}
	g.last[key] = now
	muted := g.muted[key]
	delete(g.muted, key)
	g.mu.Unlock()
	if muted > 0 {
		args = append(args, "suppressed", muted)
	}
	g.l.Log(context.Background(), level, msg, args...)
	return true
}

// maxKeys bounds the keys remembered.
const maxKeys = 1024

// Writer is an io.Writer of lines for a logger that takes one (such as
// http.Server.ErrorLog through log.New): each write is one line, logged
// through g at level under key.
func (g *Log) Writer(key string, level slog.Level) *Writer {
	return &Writer{g: g, key: key, level: level}
}

// Writer writes lines through a Log (Log.Writer).
type Writer struct {
	g     *Log
	key   string
	level slog.Level
}

// Write logs p (one line) and never fails.
func (w *Writer) Write(p []byte) (int, error) {
	n := len(p)
	for n > 0 && p[n-1] == '\n' {
		n--
	}
	w.g.Log(w.key, w.level, string(p[:n]))
	return len(p), nil
}
