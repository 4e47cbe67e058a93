package tcp

import (
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/transport"
)

// Defaults applied by Listen to zero fields.
const (
	DefaultListenAddr   = "127.0.0.1:0"
	DefaultDialTimeout  = time.Second
	DefaultWriteTimeout = 5 * time.Second
	DefaultHelloTimeout = 10 * time.Second
	DefaultMaxPayload   = wire.DefaultMaxPayload
	DefaultQueueLen     = 1024
	// DefaultMaxPending is the default of Config.MaxPending.
	DefaultMaxPending = 64
	// helloLimit bounds the payload of a frame read before the Hello: a
	// Hello's is 4 bytes, so a stranger's connection costs its read buffer
	// and no more, whatever frame length it announces.
	helloLimit = 64
	// MaxMaxPayload is the largest MaxPayload accepted.
	MaxMaxPayload = 1 << 30
)

// Config configures a Transport. Zero durations and sizes take the defaults
// above.
type Config struct {
	// Self is this process's rank, below N.
	Self uint32
	// N is the number of ranks of the job.
	N int
	// JobID identifies the job; frames of other jobs are rejected. Must
	// not be zero.
	JobID uint64
	// Key is the job's shared secret authenticating every frame (at least
	// 16 bytes).
	Key []byte
	// ListenAddr is the address to listen on (DefaultListenAddr if empty).
	ListenAddr string
	// Slots receives the heartbeats: a heartbeat from rank r stores into
	// slot r. Its Len must be at least N.
	Slots *transport.Slots
	// Handler receives the messages.
	Handler transport.Handler
	// Logger receives rejections and connection failures (rate-limited);
	// nil discards them.
	Logger *slog.Logger
	// DialTimeout bounds connection setup, Hello included.
	DialTimeout time.Duration
	// WriteTimeout bounds each write of queued messages.
	WriteTimeout time.Duration
	// HelloTimeout is how long an accepted connection may take to
	// authenticate with a Hello.
	HelloTimeout time.Duration
	// MaxPayload bounds message payloads, sent and received.
	MaxPayload int
	// QueueLen bounds the messages queued for each peer; Send drops (and
	// counts) messages beyond it.
	QueueLen int
	// MaxPending caps the accepted connections that have not authenticated
	// yet (no Hello): beyond it, the oldest is closed (counted as rejected
	// "pending_cap"). The job's ranks send their Hello as soon as they
	// connect, so a flood of strangers' connections delays them by at most
	// a redial; authenticated connections are not capped.
	MaxPending int
	// Incarnation identifies this start of the process in every frame; 0
	// draws one with wire.NewIncarnation. Peers reject frames from an
	// incarnation older than one they have seen.
	Incarnation uint64
}

// ConfigError reports an invalid Config field.
type ConfigError struct {
	Field   string // the field's name, such as "Key"
	Problem string
}

// Error formats the failure as "tcp: Config.Field: problem".
func (e *ConfigError) Error() string {
	return fmt.Sprintf("tcp: Config.%s: %s", e.Field, e.Problem)
}

func bad(field, format string, args ...any) error {
	return &ConfigError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Validate checks the configuration and returns a *ConfigError naming the
// first bad field.
func (c *Config) Validate() error {
	switch {
	case c.N <= 0:
		return bad("N", "must be positive, got %d", c.N)
	case int64(c.Self) >= int64(c.N):
		return bad("Self", "rank %d not below N=%d", c.Self, c.N)
	case c.JobID == 0:
		return bad("JobID", "must not be zero")
	case len(c.Key) < wire.MinKeyLen:
		return bad("Key", "%d bytes, need at least %d", len(c.Key), wire.MinKeyLen)
	case c.Slots == nil:
		return bad("Slots", "missing")
	case c.Slots.Len() < c.N:
		return bad("Slots", "%d slots for N=%d ranks", c.Slots.Len(), c.N)
	case c.Handler == nil:
		return bad("Handler", "missing")
	case c.DialTimeout < 0:
		return bad("DialTimeout", "negative")
	case c.WriteTimeout < 0:
		return bad("WriteTimeout", "negative")
	case c.HelloTimeout < 0:
		return bad("HelloTimeout", "negative")
	case c.MaxPayload < 0 || c.MaxPayload > MaxMaxPayload:
		return bad("MaxPayload", "%d not in [0, %d]", c.MaxPayload, MaxMaxPayload)
	case c.QueueLen < 0:
		return bad("QueueLen", "negative")
	case c.MaxPending < 0:
		return bad("MaxPending", "negative")
	}
	if c.ListenAddr != "" {
		if _, _, err := net.SplitHostPort(c.ListenAddr); err != nil {
			return bad("ListenAddr", "%v", err)
		}
	}
	return nil
}

// withDefaults returns a copy with the defaults filled in.
func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.ListenAddr == "" {
		c.ListenAddr = DefaultListenAddr
	}
	def(&c.DialTimeout, DefaultDialTimeout)
	def(&c.WriteTimeout, DefaultWriteTimeout)
	def(&c.HelloTimeout, DefaultHelloTimeout)
	if c.MaxPayload == 0 {
		c.MaxPayload = DefaultMaxPayload
	}
	if c.QueueLen == 0 {
		c.QueueLen = DefaultQueueLen
	}
	if c.MaxPending == 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Incarnation == 0 {
		c.Incarnation = wire.NewIncarnation()
	}
	c.Key = append([]byte(nil), c.Key...)
	return c
}
