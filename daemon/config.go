package daemon

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/settings"
	"github.com/vigil-hpc/vigil/transport/tcp"
)

// Config configures one node's daemon.
type Config struct {
	// Config is the daemons' detector: one node.Node per daemon, one rank
	// per node, with node.Config's settings and defaults (timing, Broadcast
	// and Gossip, block mending, the heartbeat thread, Slots, Logger), but
	// for Broadcast's default, DefaultBroadcast. Rank and Size are filled
	// in from Node and Layout; OnNote is the daemon's own (leave it nil).
	// Every daemon of the job must use the same Broadcast and Gossip.
	node.Config
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
	// given the slots and handler of the daemons' detector; Config.Slots
	// are then where that transport lands the heartbeats (an RDMA
	// transport's registered memory).
	Transport node.OpenTransport

	// HangTimeout: a local process whose heartbeat word does not move, or
	// that the kernel shows stopped, for this long is hung (default δ).
	HangTimeout time.Duration
	// KeepHung leaves a hung process running after reporting it (default:
	// SIGKILL it, so that it is fail-stop like a crashed one).
	KeepHung bool

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
}

// DefaultBroadcast is Config.Broadcast's default: the binomial graph of
// seed 003.
const DefaultBroadcast = settings.DefaultDaemonBroadcast

// withDefaults fills unset fields: the detector's as node.Config's
// (Broadcast DefaultBroadcast), with Rank and Size from Node and Layout.
func (c Config) withDefaults() Config {
	c.Rank, c.Size = c.Node, c.Layout.Nodes
	if c.Broadcast == "" {
		c.Broadcast = DefaultBroadcast
	}
	c.Config = c.Config.WithDefaults()
	if c.HangTimeout == 0 {
		c.HangTimeout = c.SuspectTimeout
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
	case c.OnNote != nil:
		return errors.New("daemon: Config.OnNote is the daemon's own (its reports): leave it nil")
	case c.HangTimeout < 0:
		return fmt.Errorf("daemon: HangTimeout = %v, want > 0 (0: δ)", c.HangTimeout)
	}
	// The daemons' detector: the timing (the bounds of the settings table),
	// Broadcast, Gossip and the rest, named as here (Config.Broadcast).
	if err := c.Config.Validate(); err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	return nil
}
