package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/memberlist"
	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// ChildLine is one JSON line printed by a head-to-head child process.
type ChildLine struct {
	// Ev is "listen" (memberlist: Addr is where to join), "ready" (every
	// member seen), "dead" (Dead is gone; Mono when this child learned
	// it), "alive" (memberlist: a rank declared dead came back) or "stats".
	Ev   string `json:"ev"`
	Rank int    `json:"rank"`
	Mono int64  `json:"mono"`
	Dead int    `json:"dead,omitempty"`
	Addr string `json:"addr,omitempty"`
	// Msgs and Bytes count what this child sent since it started:
	// datagrams and stream connections (memberlist), messages and
	// heartbeats (Vigil); payload bytes without TCP/UDP/IP headers.
	Msgs  uint64 `json:"msgs,omitempty"`
	Bytes uint64 `json:"bytes,omitempty"`
}

// MonoNow is CLOCK_MONOTONIC in nanoseconds, shared by every process of
// the machine.
func MonoNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// statsEvery is how often children print their counters.
const statsEvery = 250 * time.Millisecond

type childOut struct {
	enc  *json.Encoder
	rank int
	ch   chan ChildLine
}

func newChildOut(w io.Writer, rank int) *childOut {
	o := &childOut{enc: json.NewEncoder(w), rank: rank, ch: make(chan ChildLine, 1024)}
	go func() {
		for l := range o.ch {
			o.enc.Encode(l)
		}
	}()
	return o
}

func (o *childOut) emit(l ChildLine) {
	l.Rank = o.rank
	if l.Mono == 0 {
		l.Mono = MonoNow()
	}
	o.ch <- l
}

// VigilChild is the body of `vigil-bench child vigil`: one Vigil node
// started by the local launcher (bootstrap from the environment), printing
// ChildLines until SIGTERM.
func VigilChild(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("child vigil", flag.ContinueOnError)
	h := fs.Duration("h", 200*time.Millisecond, "heartbeat period")
	delta := fs.Duration("delta", time.Second, "suspicion time-out")
	rt := fs.Bool("realtime", true, "SCHED_FIFO for the emitter")
	early := fs.Duration("mend-early", 0, "block mending's early probes (node.Config.MendEarly: 0 for its default, negative: at the suspicion)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := vigil.DefaultConfig() // bootstrap from the local launcher's environment
	cfg.HeartbeatPeriod, cfg.SuspectTimeout, cfg.StartGrace = *h, *delta, time.Second+*delta
	cfg.RealTime, cfg.EmitterHoldsP, cfg.MendEarly = *rt, true, *early
	cfg.Heartbeat = "udp" // one datagram per heartbeat, counted below, as memberlist's packets are
	nd, err := vigil.Join(ctx, cfg)
	if err != nil {
		return err
	}
	defer nd.Close()
	out := newChildOut(stdout, int(nd.Rank()))
	out.emit(ChildLine{Ev: "ready"})
	stats := func() {
		st := nd.Stats().Transport
		out.emit(ChildLine{Ev: "stats", Msgs: st.MsgsSent + st.HeartbeatsSent,
			Bytes: st.BytesSent + st.HeartbeatsSent*wire.HeartbeatFrameSize})
	}
	return childLoop(func(tick bool) {
		if tick {
			stats()
		}
	}, func(events chan<- int) {
		for ev := range nd.Events() {
			if !ev.Left {
				events <- int(ev.Rank)
				out.emit(ChildLine{Ev: "dead", Dead: int(ev.Rank), Mono: ev.DeliveredMono})
			}
		}
	}, nd.Evicted())
}

// childLoop ticks stats until SIGTERM or eviction.
func childLoop(tick func(bool), events func(chan<- int), evicted <-chan struct{}) error {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	ev := make(chan int, 64)
	go events(ev)
	t := time.NewTicker(statsEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			tick(true)
		case <-ev:
		case <-evicted:
			tick(true)
			time.Sleep(50 * time.Millisecond)
			return nil
		case <-sigs:
			tick(true)
			time.Sleep(50 * time.Millisecond)
			return nil
		}
	}
}

// countingTransport counts memberlist's outgoing packets and streams.
type countingTransport struct {
	*memberlist.NetTransport
	msgs, bytes atomic.Uint64
}

// WriteTo counts and sends one datagram.
func (t *countingTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	t.msgs.Add(1)
	t.bytes.Add(uint64(len(b)))
	return t.NetTransport.WriteTo(b, addr)
}

// WriteToAddress counts and sends one datagram.
func (t *countingTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	t.msgs.Add(1)
	t.bytes.Add(uint64(len(b)))
	return t.NetTransport.WriteToAddress(b, a)
}

// DialTimeout opens a counted stream connection.
func (t *countingTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	c, err := t.NetTransport.DialTimeout(addr, timeout)
	return t.count(c, err)
}

// DialAddressTimeout opens a counted stream connection.
func (t *countingTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	c, err := t.NetTransport.DialAddressTimeout(a, timeout)
	return t.count(c, err)
}

func (t *countingTransport) count(c net.Conn, err error) (net.Conn, error) {
	if err != nil {
		return nil, err
	}
	t.msgs.Add(1)
	return &countingConn{Conn: c, t: t}, nil
}

type countingConn struct {
	net.Conn
	t *countingTransport
}

// Write counts the bytes written.
func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.t.bytes.Add(uint64(n))
	return n, err
}

// mlEvents forwards memberlist's membership events.
type mlEvents struct {
	dead, alive chan int
}

// NotifyJoin reports a member (re)joining.
func (e *mlEvents) NotifyJoin(n *memberlist.Node) {
	if r, err := strconv.Atoi(n.Name); err == nil {
		e.alive <- r
	}
}

// NotifyLeave reports a member declared dead (or gone).
func (e *mlEvents) NotifyLeave(n *memberlist.Node) {
	if r, err := strconv.Atoi(n.Name); err == nil {
		e.dead <- r
	}
}

// NotifyUpdate ignores metadata updates.
func (e *mlEvents) NotifyUpdate(*memberlist.Node) {}

// MemberlistChild is the body of `vigil-bench child memberlist`: one
// hashicorp/memberlist member (LAN defaults but ProbeInterval = -period and
// ProbeTimeout = period/2) that joins -seed and prints ChildLines until
// SIGTERM.
func MemberlistChild(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("child memberlist", flag.ContinueOnError)
	rank := fs.Int("rank", 0, "this member's rank (its name)")
	n := fs.Int("n", 2, "number of members")
	seed := fs.String("seed", "", "address of a member to join (empty: the first member)")
	period := fs.Duration("period", 200*time.Millisecond, "probe interval")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 1 || *rank < 0 || *rank >= *n || *period <= 0 {
		return fmt.Errorf("child memberlist: bad -rank %d, -n %d or -period %v", *rank, *n, *period)
	}
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{"127.0.0.1"}, BindPort: 0})
	if err != nil {
		return err
	}
	ct := &countingTransport{NetTransport: nt}
	cfg := memberlist.DefaultLANConfig()
	cfg.Name = strconv.Itoa(*rank)
	cfg.BindAddr, cfg.BindPort = "127.0.0.1", nt.GetAutoBindPort()
	cfg.AdvertiseAddr, cfg.AdvertisePort = "127.0.0.1", nt.GetAutoBindPort()
	cfg.ProbeInterval, cfg.ProbeTimeout = *period, *period/2
	cfg.Transport = ct
	cfg.LogOutput = io.Discard
	evs := &mlEvents{dead: make(chan int, 1024), alive: make(chan int, 1024)}
	cfg.Events = evs
	m, err := memberlist.Create(cfg)
	if err != nil {
		return err
	}
	defer m.Shutdown()
	out := newChildOut(stdout, *rank)
	out.emit(ChildLine{Ev: "listen", Addr: fmt.Sprintf("127.0.0.1:%d", nt.GetAutoBindPort())})
	if *seed != "" {
		if _, err := m.Join([]string{*seed}); err != nil {
			return fmt.Errorf("child memberlist: joining %s: %w", *seed, err)
		}
	}
	ready := false
	dead := map[int]bool{}
	return childLoop(func(bool) {
		if !ready && m.NumMembers() >= *n {
			ready = true
			out.emit(ChildLine{Ev: "ready"})
		}
		out.emit(ChildLine{Ev: "stats", Msgs: ct.msgs.Load(), Bytes: ct.bytes.Load()})
	}, func(events chan<- int) {
		for {
			select {
			case r := <-evs.dead:
				dead[r] = true
				events <- r
				out.emit(ChildLine{Ev: "dead", Dead: r})
			case r := <-evs.alive:
				if dead[r] {
					delete(dead, r)
					out.emit(ChildLine{Ev: "alive", Dead: r})
				}
			}
		}
	}, nil)
}
