package detector_test

import (
	"testing"

	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/era"
	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
)

// Times of the harness, in nanoseconds.
const (
	h     = int64(1_000_000) // heartbeat period
	delta = 5 * h            // δ
)

// words is one rank's heartbeat words, written by its emitters.
type words []uint64

// envelope is a message in flight.
type envelope struct {
	from, to ranks.Rank
	msg      wire.Message
}

// cluster drives N Cores the way a runtime does, deterministically: every
// period each running rank writes its heartbeat word into its observer's
// words, checks its emitter's word (keeping the record a heartbeat thread's
// checks keep, handed to Observe) and ticks; messages are delivered in
// order, after being encoded and decoded as a transport would.
type cluster struct {
	t       *testing.T
	cores   []*detector.Core
	words   []words
	watch   []hb.WatchRecord // what each rank's checks saw of its emitter
	target  []ranks.Rank     // where each rank heartbeats (Ready.Observer)
	beating []bool           // false once crashed, paused, alone or evicted
	crashed []bool
	evicted []bool
	side    []int // partition side of each rank (0 when healed): nothing crosses sides
	seq     []uint64
	now     int64
	queue   []envelope
	events  [][]detector.Event
	learned []map[ranks.Rank]int64 // when each rank learned each death
	decided [][]detector.Decision
	notes   [][]detector.Note
	logs    []detector.Log
	// lose, if set, drops the messages it returns true for.
	lose func(from, to ranks.Rank, m wire.Message) bool
}

func newCluster(t *testing.T, n int, tweak func(*detector.Config)) *cluster {
	t.Helper()
	c := &cluster{t: t, cores: make([]*detector.Core, n), words: make([]words, n), watch: make([]hb.WatchRecord, n), target: make([]ranks.Rank, n),
		beating: make([]bool, n), crashed: make([]bool, n), evicted: make([]bool, n), seq: make([]uint64, n), side: make([]int, n),
		events: make([][]detector.Event, n), decided: make([][]detector.Decision, n), notes: make([][]detector.Note, n), learned: make([]map[ranks.Rank]int64, n)}
	for i := range n {
		c.words[i] = make(words, n)
		cfg := detector.Config{Self: ranks.Rank(i), Size: n, SuspectTimeout: delta, Zombies: true, AgreeResend: delta}
		if tweak != nil {
			tweak(&cfg)
		}
		core, err := detector.NewCore(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.cores[i] = core
		core.Start(0, 2*delta)
		c.flush(ranks.Rank(i))
	}
	return c
}

func (c *cluster) time() detector.Time { return detector.Time{Mono: c.now, Wall: 1e18 + c.now} }

// flush hands rank r's Core the words it wants and carries out its Ready.
func (c *cluster) flush(r ranks.Rank) {
	core := c.cores[r]
	if rs := core.WantWords(); rs != nil {
		ws := make([]uint64, len(rs))
		for i, x := range rs {
			ws[i] = c.words[r][x]
		}
		core.Words(c.time(), rs, ws)
	}
	rd := core.Ready()
	if rd.Watch {
		c.watch[r] = hb.WatchRecord{Emitter: rd.Emitter, GrewAt: c.now, CheckedAt: c.now}
	}
	if rd.Retarget {
		c.target[r], c.beating[r] = rd.Observer, !rd.Alone && !c.crashed[r] && !c.evicted[r]
	}
	for _, s := range rd.Sends {
		for _, to := range s.To {
			c.queue = append(c.queue, envelope{r, to, s.Msg})
		}
	}
	c.events[r] = append(c.events[r], rd.Events...)
	for _, ev := range rd.Events {
		if c.learned[r] == nil {
			c.learned[r] = map[ranks.Rank]int64{}
		}
		c.learned[r][ev.Rank] = c.now
	}
	c.decided[r] = append(c.decided[r], rd.Decisions...)
	c.notes[r] = append(c.notes[r], rd.Notes...)
	c.logs = append(c.logs, rd.Logs...)
	if rd.Evicted {
		c.evicted[r], c.beating[r] = true, false
	}
}

// running reports whether rank r takes part (not crashed, not evicted).
func (c *cluster) running(r ranks.Rank) bool { return !c.crashed[r] && !c.evicted[r] }

// deliver hands every queued message to its destination, until none is
// left; messages to crashed ranks are lost.
func (c *cluster) deliver() { c.deliverSome(-1) }

// deliverSome hands at most k queued messages (all when k < 0) to their
// destinations.
func (c *cluster) deliverSome(k int) {
	for ; len(c.queue) > 0 && k != 0; k-- {
		e := c.queue[0]
		c.queue = c.queue[1:]
		if c.crashed[e.to] || c.side[e.from] != c.side[e.to] || c.lose != nil && c.lose(e.from, e.to, e.msg) {
			continue
		}
		m, err := wire.DecodeMessage(wire.AppendMessage(nil, e.msg), len(c.cores))
		if err != nil {
			c.t.Fatalf("%T from %d to %d: %v", e.msg, e.from, e.to, err)
		}
		c.cores[e.to].Step(c.time(), e.from, m)
		c.flush(e.to)
	}
}

// run advances time by d, one heartbeat period at a time; a timed
// propagation's steps due in a period are taken at its end.
func (c *cluster) run(d int64) {
	for end := c.now + d; c.now < end; {
		c.now += h
		for r := range c.cores {
			if c.beating[r] {
				c.seq[r]++
				if c.side[r] == c.side[c.target[r]] {
					c.words[c.target[r]][r] = c.seq[r]
				}
			}
		}
		for r, core := range c.cores {
			if !c.running(ranks.Rank(r)) {
				continue
			}
			w := &c.watch[r]
			if seq := c.words[r][w.Emitter]; seq > w.Seq {
				w.Seq, w.GrewAt = seq, c.now
			}
			w.CheckedAt = c.now
			core.Observe(c.time(), *w)
			c.flush(ranks.Rank(r))
			core.Tick(c.time())
			c.flush(ranks.Rank(r))
		}
		c.deliver()
	}
}

// partition cuts ranks rs off from the others (no heartbeat or message
// crosses) until heal.
func (c *cluster) partition(rs ...ranks.Rank) {
	for _, r := range rs {
		c.side[r] = 1
	}
}

// heal ends the partition.
func (c *cluster) heal() { clear(c.side) }

// crash stops rank r: no heartbeat, no message, no check.
func (c *cluster) crash(rs ...ranks.Rank) {
	for _, r := range rs {
		c.crashed[r], c.beating[r] = true, false
	}
}

// gone returns the ranks rank r was told are gone, in delivery order.
func (c *cluster) gone(r ranks.Rank) []ranks.Rank {
	var out []ranks.Rank
	for _, ev := range c.events[r] {
		out = append(out, ev.Rank)
	}
	return out
}

// wantGone checks that every running rank knows exactly the ranks of want
// gone, each once.
func (c *cluster) wantGone(want ...ranks.Rank) {
	c.t.Helper()
	set := ranks.Of(want...)
	for r := range c.cores {
		if !c.running(ranks.Rank(r)) {
			continue
		}
		got := c.gone(ranks.Rank(r))
		var g ranks.Set
		for _, x := range got {
			if !g.Add(x) {
				c.t.Fatalf("rank %d: rank %d delivered twice (%v)", r, x, got)
			}
		}
		if !g.Equal(set) {
			c.t.Fatalf("rank %d knows %v gone, want %v", r, got, want)
		}
	}
}

// agree starts an automatic agreement with op on every running rank.
func (c *cluster) agree(op detector.AgreeOp, value func(r ranks.Rank) []byte) {
	c.t.Helper()
	for r, core := range c.cores {
		if !c.running(ranks.Rank(r)) {
			continue
		}
		if _, err := core.Agree(op, nil, value(ranks.Rank(r))); err != nil {
			c.t.Fatalf("rank %d: %v", r, err)
		}
		c.flush(ranks.Rank(r))
	}
}

// lastDecision returns rank r's last decision.
func (c *cluster) lastDecision(r ranks.Rank) (era.Decision, bool) {
	d := c.decided[r]
	if len(d) == 0 {
		return era.Decision{}, false
	}
	return d[len(d)-1].Decision, true
}
