package node

import (
	"log/slog"
	"math"
	"time"

	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
)

// A sign of life asked for when the emitter's heartbeats may have been
// dropped by a forged flood (issue #30). Over UDP the watched emitter's
// heartbeats wait in a socket of their own, connect()ed to it and filtered
// on the job's and the emitter's identity (transport/tcp); only the
// emitter, one datagram per period, sends there. A flood of datagrams
// forged with its address and the header of its frames (an attacker who
// sees them) fills that socket faster than the check drains it, and the
// kernel drops the emitter's heartbeats with the flood: the emitter looks
// silent. The kernel counts those drops (transport.LaneDrops).
//
// When the emitter has been silent for the watch's alarm and its socket
// dropped datagrams since the loop last looked, the node sends the
// emitter a PROBE over its message connection (TCP, authenticated, which
// a datagram flood does not reach), and looks again every δ/4 while both
// last. A live emitter answers ALIVE; the ring takes any message from its
// emitter as evidence of life (hb.Ring.Heard) and withholds SUSP-TIMEOUT
// while the last one is less than δ old (it re-arms it to δ after that
// message). A dead emitter does not answer, and is reported no later than
// δ after its last answer: at most δ/4 + δ after the crash, plus a check.
// The PROBE's round is above any round of block mending, so the ALIVE
// answers none of its rounds.
//
// The alarm comes at early probes' MendEarly, about 0.4δ, by default.
// Without early probes it comes at δ, too late: SUSP-TIMEOUT expires at
// the same wake. The drops are read only during a silence, so the first
// look of a silence counts those since the previous one: an old flood may
// cost one PROBE.

// laneProbeRound is the round of the lane guard's PROBEs.
const laneProbeRound = math.MaxUint64

// laneGuard is the loop's state of the guard.
type laneGuard struct {
	drops  func() uint64 // the lane's kernel drops; nil: no lane
	seen   uint64        // drops at the last look
	next   int64         // no PROBE before (mono ns)
	active bool          // probing for the current silence
}

// guardLane is the guard's look at now, from the loop, with rec the
// checks' record; it returns how soon to look again (time.Hour: no need).
func (n *Node) guardLane(now int64, rec hb.WatchRecord) time.Duration {
	g := &n.lane
	if g.drops == nil || int(rec.Emitter) >= n.cfg.Size || rec.Emitter == n.cfg.Rank {
		return time.Hour
	}
	if now-rec.GrewAt < n.silence { // heard: no system call
		g.active = false
		return time.Hour
	}
	d := g.drops()
	grew := d > g.seen // since the last silence, at the first look
	g.seen = d
	if !grew {
		g.active = false
		return time.Hour
	}
	every := max(n.cfg.SuspectTimeout/4, n.cfg.CheckPeriod)
	if now >= g.next {
		if !g.active {
			n.laneLog.Log("lane", slog.LevelWarn, "node: the emitter is silent and its heartbeat socket is dropping datagrams (a flood from its forged address?): asking it for a sign of life",
				"emitter", rec.Emitter, "dropped", d)
		}
		g.active = true
		n.sendAll([]ranks.Rank{rec.Emitter}, &wire.Probe{Round: laneProbeRound})
		n.laneProbes.Add(1)
		g.next = now + int64(every)
	}
	return every
}
