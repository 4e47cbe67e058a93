package daemon

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/settings"
	"github.com/vigil-hpc/vigil/transport"
	"github.com/vigil-hpc/vigil/transport/tcp"
)

// Config configures one node's daemon.
type Config struct {
	// Node is this daemon's index (its rank in the daemons' ring), Layout
	// the job's shape.
	Node   ranks.Rank
	Layout Layout
	// Peers are the daemons' TCP addresses, indexed by node; Listen is
	// this daemon's listen address (default Peers[Node], or 127.0.0.1:0
	// with Exchange).
	Peers  []string
	Listen string
	// Exchange, when Peers is nil, publishes this daemon's address and
	// returns every daemon's (a launcher's allgather, such as the PMIx
	// bootstrap's Exchange).
	Exchange func(addr string) ([]string, error)
	// JobID and Key authenticate the daemons' traffic (transport/tcp).
	JobID uint64
	Key   []byte
	// Transport, if set, opens the daemons' transport instead of TCP at
	// Peers, Listen and Exchange (which are then ignored): verbs, say. It is
	// given the slots and handler of the daemons' detector.
	Transport node.OpenTransport
	// Slots, with Transport, are where that transport lands the heartbeats
	// (an RDMA transport's registered memory; default: ordinary memory).
	Slots *transport.Slots

	// HeartbeatPeriod (h), SuspectTimeout (δ), CheckPeriod and StartGrace
	// as in node.Config, for the daemons' ring.
	HeartbeatPeriod, SuspectTimeout, CheckPeriod, StartGrace time.Duration
	// Broadcast names the propagation of the daemons' failure news and
	// reports, as node.Config.Broadcast (one of node.Broadcasts; default
	// "bmg", seed 003's binomial graph), and Gossip tunes it when it is a
	// corrected gossip ("ocg", "ccg", "fcg") or the corrected tree
	// ("ctree"). Every daemon of the job must use the same.
	Broadcast string
	Gossip    node.GossipConfig
	// MendProbe is the block-mending window of the daemons' ring
	// (node.Config.MendProbe: default node.DefaultMendProbe; negative for
	// seed 000's Algorithm 1), so that several nodes dying together are
	// known in about 2δ.
	MendProbe int
	// HangTimeout: a local process whose heartbeat word does not move, or
	// that the kernel shows stopped, for this long is hung (default δ).
	HangTimeout time.Duration
	// KeepHung leaves a hung process running after reporting it (default:
	// SIGKILL it, so that it is fail-stop like a crashed one).
	KeepHung bool

	// PinEmitter pins the heartbeat thread to CPU EmitterCPU. RealTime asks
	// for SCHED_FIFO for it, and HoldP keeps a Go P for it (as
	// node.Config.EmitterHoldsP: for a process that runs one daemon).
	PinEmitter bool
	EmitterCPU int
	RealTime   bool
	HoldP      bool

	// Socket is the path of the local Unix socket ("" for none).
	Socket string
	// Spawn, when set, is the command the daemon starts once per hosted
	// rank (with VIGIL_RANK, VIGIL_NODE and VIGIL_DAEMON_SOCK set), with
	// SpawnOut as its standard output and error (default the daemon's).
	Spawn    []string
	SpawnOut *os.File
	// SpawnRanks limits Spawn to the first SpawnRanks hosted ranks (0: all);
	// the others may attach over the socket.
	SpawnRanks int

	// Logger receives the daemon's logs (default: discarded).
	Logger *slog.Logger
}

// DefaultBroadcast is Config.Broadcast's default: the binomial graph of
// seed 003.
const DefaultBroadcast = settings.DefaultDaemonBroadcast

// nodeConfig is the configuration of the daemons' detector (without the
// daemon's logger and note handler), after defaults.
func (c Config) nodeConfig() node.Config {
	return node.Config{Rank: c.Node, Size: c.Layout.Nodes, HeartbeatPeriod: c.HeartbeatPeriod,
		SuspectTimeout: c.SuspectTimeout, CheckPeriod: c.CheckPeriod, StartGrace: c.StartGrace,
		Broadcast: c.Broadcast, Gossip: c.Gossip, MendProbe: c.MendProbe, PinEmitter: c.PinEmitter,
		EmitterCPU: c.EmitterCPU, RealTime: c.RealTime, EmitterHoldsP: c.HoldP, Slots: c.Slots}
}

func (c Config) withDefaults() Config {
	// The daemons' detector is a node.Node: its timing defaults.
	nc := node.Config{HeartbeatPeriod: c.HeartbeatPeriod, SuspectTimeout: c.SuspectTimeout, CheckPeriod: c.CheckPeriod,
		StartGrace: c.StartGrace}.WithDefaults()
	c.HeartbeatPeriod, c.SuspectTimeout, c.CheckPeriod, c.StartGrace = nc.HeartbeatPeriod, nc.SuspectTimeout, nc.CheckPeriod, nc.StartGrace
	if c.HangTimeout == 0 {
		c.HangTimeout = c.SuspectTimeout
	}
	if c.Broadcast == "" {
		c.Broadcast = DefaultBroadcast
	}
	if c.Listen == "" && int64(c.Node) < int64(len(c.Peers)) {
		c.Listen = c.Peers[c.Node]
	}
	if c.Listen == "" {
		c.Listen = tcp.DefaultListenAddr
	}
	if c.SpawnOut == nil {
		c.SpawnOut = os.Stderr
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports the first bad field, after defaults.
func (c Config) Validate() error {
	if err := c.Layout.Validate(); err != nil {
		return err
	}
	c = c.withDefaults()
	switch {
	case int64(c.Node) >= int64(c.Layout.Nodes):
		return fmt.Errorf("daemon: Config.Node = %d, want < %d nodes", c.Node, c.Layout.Nodes)
	case c.Transport == nil && c.Exchange == nil && len(c.Peers) != c.Layout.Nodes:
		return fmt.Errorf("daemon: %d peer addresses for %d nodes (and no Exchange)", len(c.Peers), c.Layout.Nodes)
	case c.PinEmitter && c.EmitterCPU < 0:
		return fmt.Errorf("daemon: EmitterCPU = %d, want a CPU number ≥ 0", c.EmitterCPU)
	case c.HangTimeout < 0:
		return fmt.Errorf("daemon: HangTimeout = %v, want > 0 (0: δ)", c.HangTimeout)
	}
	// The daemons' detector: the timing (the bounds of the settings table),
	// Broadcast and Gossip (named Config.Broadcast and Config.Gossip, as
	// here), and the rest.
	if err := c.nodeConfig().Validate(); err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	return nil
}
