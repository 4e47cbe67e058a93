package detector

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/era"
	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
)

// Config configures a Core. Times are nanoseconds.
type Config struct {
	// Self is this rank and Size the job's number of ranks.
	Self ranks.Rank
	Size int
	// SuspectTimeout is δ.
	SuspectTimeout int64
	// Probe and ProbeTimeout turn on block mending (hb.RingConfig): a
	// dead block of consecutive ranks is known in about 2δ, not 2δ per
	// rank. 0 is Algorithm 1's mending.
	Probe        int
	ProbeTimeout int64
	// ProbeAfter probes the emitter's predecessors once it has been
	// silent that long, before its suspicion (hb.RingConfig.ProbeAfter; 0:
	// at the suspicion).
	ProbeAfter int64
	// Hosts labels the host of every rank (hb.RingConfig.Hosts; nil:
	// none): with Probe, a probe round takes in the rest of its first
	// candidate's host, so a dead host of any size is one round.
	Hosts []uint32
	// Overlay is the broadcast overlay (default bcast.HBA).
	Overlay bcast.Overlay
	// Gossip, if set, propagates with a corrected gossip or the corrected
	// tree (bcast.Gossip) instead of Overlay; its timed steps are due at
	// NextWake.
	Gossip *bcast.GossipConfig
	// Zombies turns on the zombie check: the driver hands the heartbeat
	// words the Core asks for (WantWords, Words), and a rank held dead
	// whose word grows is told it is evicted.
	Zombies bool

	// CheckPeriod is how often the driver's checks of the emitter run (the
	// heartbeat thread's, whose records Observe takes); 0: the driver
	// checks at every wake.
	CheckPeriod int64
	// Alarm is the silence of the emitter (≤ SuspectTimeout) at which the
	// driver's checks wake it (heartbeat.Watch.SetAlarm): NextWake leaves
	// the emitter's silence to that alarm while the emitter is heard. 0: no
	// alarm; NextWake then names every deadline of the ring.
	Alarm int64
	// Housekeeping is how often Tick looks for work (agreement resends,
	// dead-list questions, split probes, the zombie check) while there is
	// some (default SuspectTimeout).
	Housekeeping int64

	// AgreeOps are the operations after the built-ins (OpCustom+i).
	AgreeOps []era.Op
	// AgreeTree is the agreements' tree (default era.Binary(Size)).
	AgreeTree era.Tree
	// AgreeRebalance rebuilds the tree of each automatic agreement over the
	// survivors of the previous one (needs an *era.HeapTree or nil).
	AgreeRebalance bool
	// AgreeResend is how often open agreements are nudged (≤ 0: never).
	AgreeResend int64

	// Partition is what a rank holding most of its membership dead does
	// (quorum.go; default PartitionFailStop: it stops).
	Partition PartitionMode
}

// Core is one rank's failure detector. It is not safe for concurrent use:
// one driver owns it.
type Core struct {
	cfg  Config
	ring *hb.Ring
	prop bcast.Propagator
	out  bcast.Out // the propagator's, reused
	gone gone      // every rank delivered gone (gone.go)
	// departed are the ranks whose own LEAVE reached this rank: a LEAVE
	// naming another rank is taken from them only (one they forward).
	departed map[ranks.Rank]bool
	zombies  *hb.Zombies
	repair   repairState
	split    splitState
	quorum   quorumState // quorum.go
	agree    *agreeState
	evicted  bool
	at       Time       // the time of the last input (Start, Observe, Tick, Step)
	watched  ranks.Rank // the emitter the last Ready's Watch named
	wake     wakeState  // wake.go
	rd       Ready
	stats    Stats
}

// NewCore returns a Core for cfg; call Start before anything else.
func NewCore(cfg Config) (*Core, error) {
	if cfg.Overlay == nil {
		cfg.Overlay = bcast.HBA{}
	}
	if cfg.Housekeeping <= 0 {
		cfg.Housekeeping = cfg.SuspectTimeout
	}
	if cfg.Alarm < 0 || cfg.Alarm > cfg.SuspectTimeout || cfg.CheckPeriod < 0 {
		return nil, fmt.Errorf("detector: Alarm = %d, CheckPeriod = %d: want Alarm in [0, SuspectTimeout = %d] and CheckPeriod ≥ 0",
			cfg.Alarm, cfg.CheckPeriod, cfg.SuspectTimeout)
	}
	ring, err := hb.NewRing(hb.RingConfig{Self: cfg.Self, N: cfg.Size, Delta: cfg.SuspectTimeout,
		Probe: cfg.Probe, ProbeTimeout: cfg.ProbeTimeout, ProbeAfter: cfg.ProbeAfter, Hosts: cfg.Hosts})
	if err != nil {
		return nil, fmt.Errorf("detector: %w", err)
	}
	if _, heap := cfg.AgreeTree.(*era.HeapTree); cfg.AgreeRebalance && cfg.AgreeTree != nil && !heap {
		return nil, fmt.Errorf("detector: AgreeRebalance needs an *era.HeapTree, not %T", cfg.AgreeTree)
	}
	if cfg.Partition > PartitionContinue {
		return nil, fmt.Errorf("detector: Config.Partition = %v, want PartitionFailStop or PartitionContinue", cfg.Partition)
	}
	if len(cfg.AgreeOps) > 255-int(OpCustom) {
		return nil, fmt.Errorf("detector: %d agreement operations, at most %d", len(cfg.AgreeOps), 255-int(OpCustom))
	}
	var prop bcast.Propagator = bcast.NewBroadcaster(cfg.Self, cfg.Size, cfg.Overlay)
	if cfg.Gossip != nil {
		g, err := bcast.NewGossip(cfg.Self, cfg.Size, *cfg.Gossip)
		if err != nil {
			return nil, fmt.Errorf("detector: %w", err)
		}
		prop = g
	}
	return &Core{
		cfg:      cfg,
		ring:     ring,
		prop:     prop,
		departed: map[ranks.Rank]bool{},
		zombies:  hb.NewZombies(cfg.Size),
		agree:    newAgreeState(&cfg),
	}, nil
}

// Start arms the first suspicion deadline grace after now. The first
// Ready points the heartbeat thread and the checks.
func (c *Core) Start(now, grace int64) {
	c.Arm(now, grace)
	c.watched = c.ring.Emitter()
	c.rd.Watch, c.rd.Emitter = true, c.watched
	c.retarget()
}

// Arm counts the start-up grace again, from now: for a driver that starts
// the heartbeat thread (Start, then the first Ready) before a fence that
// every rank passes once its own thread runs, and arms the first
// suspicion deadline only after it. It must come before the Core's first
// input (Tick, Observe, Step).
func (c *Core) Arm(now, grace int64) {
	c.ring.Start(now, grace)
	c.at = Time{Mono: now}
	c.wake.nextHouse = now + c.cfg.Housekeeping
}

// Ready returns what the driver must do and clears it.
func (c *Core) Ready() Ready {
	r := c.rd
	c.rd = Ready{}
	return r
}

// Self returns this rank.
func (c *Core) Self() ranks.Rank { return c.cfg.Self }

// Size returns the job's number of ranks.
func (c *Core) Size() int { return c.cfg.Size }

// Emitter returns the rank this rank observes.
func (c *Core) Emitter() ranks.Rank { return c.ring.Emitter() }

// Observer returns the rank that observes this rank.
func (c *Core) Observer() ranks.Rank { return c.ring.Observer() }

// Alone reports whether every other rank is known gone.
func (c *Core) Alone() bool { return c.ring.Alone() }

// Dead returns D_i, the ranks known gone. The caller must not modify it.
func (c *Core) Dead() *ranks.Set { return c.ring.Dead() }

// Known returns the event of rank r, if this rank knows it is gone.
func (c *Core) Known(r ranks.Rank) (Event, bool) { return c.gone.get(r) }

// Evicted reports whether the job declared this rank dead.
func (c *Core) Evicted() bool { return c.evicted }

// Stats returns the Core's counters.
func (c *Core) Stats() Stats { return c.stats }

// Ring returns the observation ring, for inspection only.
func (c *Core) Ring() *hb.Ring { return c.ring }

// Observe hands the ring what the heartbeat thread's checks saw of the
// emitter (seed 000 T2 and T3, hb.Ring.Observe): the only way into a
// suspicion. A driver calls it at every wake with the checks' latest
// record.
func (c *Core) Observe(now Time, rec hb.WatchRecord) {
	c.at = now
	if c.evicted {
		return
	}
	c.wake.rec = rec
	c.apply(now, c.ring.Observe(now.Mono, rec))
}

// Tick is the passing of time; a driver calls it at every wake. When the
// housekeeping is due (every Config.Housekeeping, a wake within half of
// it sharing the turn) or a timed propagation's step is, it nudges the
// open agreements, asks the dead-list questions that are due, sends the
// split probe that is due and takes the propagation's due steps; the
// housekeeping also asks for the zombies' words (WantWords).
func (c *Core) Tick(now Time) {
	c.at = now
	if c.evicted {
		return
	}
	house := now.Mono >= c.wake.nextHouse-c.cfg.Housekeeping/2
	due := c.prop.Next()
	if !house && (due == 0 || now.Mono < due) {
		return
	}
	if house {
		c.wake.nextHouse = now.Mono + c.cfg.Housekeeping
		c.wake.zombiesDue = c.cfg.Zombies && c.zombies.Len() > 0
	}
	c.agreeTick(now.Mono)
	c.repairDue(now.Mono)
	c.probeSplit(now.Mono) // split.go
	if due != 0 {
		c.out.Reset()
		c.prop.Tick(now.Mono, c.ring.Dead(), &c.out)
		c.propagated(now, c.cfg.Self, nil)
	}
}

// Step handles message m from rank from.
func (c *Core) Step(now Time, from ranks.Rank, m wire.Message) {
	c.at = now
	if c.evicted {
		return
	}
	if ev, ok := m.(*wire.Evicted); ok {
		c.onEvicted(from, ev)
		return
	}
	if c.zombies.Held(from) {
		// A rank we hold dead is talking: it was declared dead while
		// paused and resumed. Its word is not to be trusted; tell it.
		c.evict(from, now.Mono)
		return
	}
	c.ring.Heard(now.Mono, from) // evidence of life (hb/health.go)
	switch m := m.(type) {
	case *wire.NewObserver: // task T4
		if m.Observer != from {
			c.bad("NEWOBSERVER names another rank than its sender", "from", from, "observer", m.Observer)
			return
		}
		if c.ring.Left() {
			c.sayLeft(from)
			return
		}
		out, err := c.ring.NewObserver(now.Mono, m.Observer)
		if err != nil {
			c.bad("dropping NEWOBSERVER", "from", from, "err", err)
			return
		}
		c.apply(now, out)
		if out.ObserverChanged {
			c.repairSegment(now.Mono, m.Observer) // repair.go
		}
	case *wire.Leave:
		if m.Rank == from {
			c.departed[from] = true
		} else if !c.departed[from] {
			c.bad("LEAVE names another rank than its sender, which has not departed", "from", from, "named", m.Rank)
			return
		}
		out, err := c.ring.Departed(now.Mono, m.Rank, m.Emitter)
		if err != nil {
			c.bad("dropping LEAVE", "from", from, "err", err)
			return
		}
		c.apply(now, out)
	case *wire.Bcast: // task T5
		c.out.Reset()
		if err := c.prop.Step(now.Mono, from, m.Message, c.ring.Dead(), &c.out); err != nil {
			c.bad("dropping invalid broadcast", "from", from, "err", err)
			return
		}
		c.propagated(now, from, m)
	case *wire.Agree:
		c.agreeStep(from, m) // agree.go
	case *wire.Sync:
		c.onSync(now, from, m) // repair.go
	case *wire.Probe: // block mending: a live rank answers at once
		if m.Round == 0 {
			return // a split probe asks nothing of a rank that holds its sender alive (split.go)
		}
		if c.ring.Left() {
			c.sayLeft(from)
			return
		}
		c.send([]ranks.Rank{from}, &wire.Alive{Round: m.Round})
	case *wire.Alive:
		c.ring.Alive(from, m.Round)
	default:
		c.bad("dropping a message of unexpected type", "from", from, "type", m.Type())
	}
}

// Publish broadcasts payload (at most bcast.MaxPayload bytes) to every
// rank not known dead, over the same overlay and with the same tolerance
// as a failure: each live rank's Ready carries it once as a Note (not this
// rank's). It reports false when there is no one to tell (this rank is
// alone or evicted) or the payload is too long.
func (c *Core) Publish(now Time, payload []byte) bool {
	if c.evicted || c.ring.Alone() || len(payload) > bcast.MaxPayload {
		return false
	}
	c.stats.BcastsStarted++
	c.stats.NotesPublished++
	c.begin(now, bcast.Note, nil, *c.ring.Dead(), append([]byte(nil), payload...))
	return true
}

// Leave departs cleanly: the ring stops, and the LEAVE message to the
// observer is returned (ok is false when this rank is alone or already
// left). The driver stops the heartbeat thread and sends msg to observer.
func (c *Core) Leave() (observer ranks.Rank, msg *wire.Leave, ok bool) {
	if c.ring.Alone() || c.evicted {
		c.ring.Leave()
		return 0, nil, false
	}
	observer, emitter := c.ring.Leave()
	return observer, &wire.Leave{Rank: c.cfg.Self, Emitter: emitter}, true
}

// sayLeft answers a rank that asks this departed (but still running) rank
// to be its emitter, or probes it: LEAVE(self, emitter), so it announces a
// departure and adopts the emitter instead of reporting a crash.
func (c *Core) sayLeft(to ranks.Rank) {
	c.send([]ranks.Rank{to}, &wire.Leave{Rank: c.cfg.Self, Emitter: c.ring.Emitter()})
}

// apply carries out what the ring asked for: retarget the heartbeats, send
// NEWOBSERVER, start the broadcast of a detection and deliver it.
func (c *Core) apply(now Time, out hb.Output) {
	if e := c.ring.Emitter(); e != c.watched {
		c.watched = e
		c.rd.Watch, c.rd.Emitter = true, e
	}
	if out.ObserverChanged {
		c.retarget()
	}
	if out.SendNewObserver {
		c.send([]ranks.Rank{out.NewObserverTo}, &wire.NewObserver{Observer: c.cfg.Self})
	}
	if len(out.Probe) > 0 {
		c.send(out.Probe, &wire.Probe{Round: out.ProbeRound})
	}
	if f := out.ForwardLeave; f != nil {
		c.send([]ranks.Rank{out.ForwardTo}, &wire.Leave{Rank: f.Rank, Emitter: f.Emitter})
	}
	if d := out.Detected; d != nil {
		kind := bcast.Failed
		if d.Left {
			kind = bcast.Left
		}
		dead := append([]ranks.Rank{d.Dead}, d.More...)
		c.stats.BcastsStarted++
		rs := c.ring.Stats()
		c.log(slog.LevelInfo, "detected", "health", c.ring.Health(now.Mono), "dead", dead, "left", d.Left, "next_emitter", c.ring.Emitter(), "frozen", d.Frozen,
			"life_read", d.LifeRead, "refuted", rs.Refuted, "held", rs.Held, "lives_seen", rs.LivesSeen, "ran_ago", ranAgo(now.Mono, d.Ran), "read_ago", ranAgo(now.Mono, d.Read))
		msg := c.begin(now, kind, dead, d.D, nil)
		c.deliver(now, msg, dead)
	}
}

// ranAgo is how long before now t was, for the detected log line (-1:
// t is 0, never).
func ranAgo(now, ran int64) time.Duration {
	if ran == 0 {
		return -1
	}
	return time.Duration(now - ran)
}

// begin starts a broadcast from this rank (seed 000's BCASTMSG) and sends
// its first messages.
func (c *Core) begin(now Time, kind bcast.Kind, dead []ranks.Rank, D ranks.Set, payload []byte) bcast.Message {
	msg, sends := c.prop.Begin(now.Mono, bcast.Message{Kind: kind, Dead: dead, D: D, DetectedAt: now.Wall, Payload: payload})
	for _, s := range sends {
		c.send(s.To, &wire.Bcast{Message: s.Msg})
	}
	return msg
}

// propagated carries out the Propagator's Out (c.out, task T5): deliver
// each broadcast (a Note to the driver; a failure to the ring, the known
// ranks and the agreements), send the copies, then ask the dead-list
// repair's questions. from is the rank whose message in caused it (this
// rank and nil for a Tick); a copy that is in unchanged (an overlay
// forwards what it received) is sent as in, not re-wrapped.
func (c *Core) propagated(now Time, from ranks.Rank, in *wire.Bcast) {
	out := &c.out
	for i := range out.Deliver {
		m := &out.Deliver[i]
		if m.Kind == bcast.Note {
			c.rd.Notes = append(c.rd.Notes, Note{Source: m.ID.Source, At: m.DetectedAt, Payload: m.Payload})
			continue
		}
		observer := c.ring.Observer()
		fresh, observerChanged := c.ring.Learn(now.Mono, m.Dead)
		if observerChanged {
			c.retarget()
			if m.Kind == bcast.Failed && slices.Contains(fresh, observer) {
				// Our heartbeats leave it now: if it is a zombie (paused
				// past δ, resumed), it must stop before it suspects us.
				c.evict(observer, now.Mono)
			}
		}
		c.deliver(now, *m, fresh)
	}
	for _, s := range out.Sends {
		c.stats.BcastsForwarded += uint64(len(s.To))
		if in != nil && s.Msg.ID == in.ID && s.Msg.Hop.Phase == bcast.PhaseNone {
			c.send(s.To, in)
		} else {
			c.send(s.To, &wire.Bcast{Message: s.Msg})
		}
	}
	for i := range out.Deliver {
		if m := &out.Deliver[i]; m.Kind != bcast.Note {
			c.repairBcast(now.Mono, from, m) // repair.go
		}
	}
}

// retarget asks the driver to point the heartbeat thread at the ring's
// observer (or pause it).
func (c *Core) retarget() {
	c.rd.Retarget, c.rd.Observer, c.rd.Alone = true, c.ring.Observer(), c.ring.Alone()
	c.log(slog.LevelDebug, "heartbeats to a new observer", "observer", c.rd.Observer)
}

// deliver records the ranks of fresh (new to this rank) as gone at now,
// with m's kind and detector, counts them, and hands them to the
// agreements (ERA Part 4).
func (c *Core) deliver(now Time, m bcast.Message, fresh []ranks.Rank) {
	var gone []ranks.Rank
	for _, r := range fresh {
		ev := Event{Rank: r, Left: m.Kind == bcast.Left, Detector: m.Detector, DetectedAt: m.DetectedAt, Delivered: now}
		if !c.gone.add(ev, c.cfg.Size) {
			continue
		}
		c.rd.Events = append(c.rd.Events, ev)
		gone = append(gone, r)
		switch {
		case ev.Left: // a departing rank may still be flushing: not a zombie
			c.stats.Departures++
		case ev.Detector == c.cfg.Self:
			c.stats.Reported++
			fallthrough
		default:
			c.stats.DeathsLearned++
			c.zombies.Hold(r)
		}
	}
	c.agreeDead(gone)     // agree.go
	c.quorumLearned(gone) // quorum.go
	if m.Kind != bcast.Left {
		c.repairPushLater(now.Mono, gone) // repair.go
	}
}

// send queues m for every rank of to.
func (c *Core) send(to []ranks.Rank, m wire.Message) {
	if len(to) > 0 {
		c.rd.Sends = append(c.rd.Sends, Send{To: to, Msg: m})
	}
}

func (c *Core) log(level slog.Level, msg string, args ...any) {
	c.rd.Logs = append(c.rd.Logs, Log{Level: level, Msg: msg, Args: args})
}

// bad counts a message that made no sense and logs why.
func (c *Core) bad(msg string, args ...any) {
	c.stats.BadMessages++
	c.log(slog.LevelWarn, msg, args...)
}
