package detector

import (
	"log/slog"
	"math/bits"
	"slices"
	"time"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
)

// Dead-list repair: an extension to seed 000, outside Algorithm 1.
//
// The double hypercube broadcast tolerates k−1 failures during the
// broadcast (k = ⌊log2 |A|⌋). Beyond Theorem 1's ⌊log2 N⌋−1 overlapping
// failures it can miss a survivor: at N = 8, with ranks 1, 2 and 3 crashed
// at once, rank 4 announces 3 with D = {3}, and rank 0's only neighbours in
// the second hypercube are 1 and 2. Algorithm 1 has nothing to repair it:
// T5 adds only the announced ranks to D_i. Two digest checks do:
//
//   - Broadcast digest. Every broadcast carries its source's D. A node that
//     receives a broadcast for the first time and finds in m.D ranks it
//     does not hold dead asks the source about them (SYNC with Ask); the
//     source answers with its records of those it holds (SYNC with
//     Records). Any later broadcast, of any failure, thus repairs the
//     earlier ones it follows.
//   - Segment digest. An observer that mends the ring sends NEWOBSERVER to
//     its new emitter, skipping a segment of ranks it holds dead; all of
//     them lie strictly between the emitter and the observer on the ring.
//     The emitter asks its new observer about those it does not hold dead.
//   - Ring push. Beyond the broadcast's tolerance, a rank that learns
//     crashes (by any path) sends their records, those of one repairDelay
//     together, to its emitter and its observer (SYNC with Records). A
//     neighbour that lacks some learns them and pushes them on in turn;
//     one that holds them all does nothing more. So a crash known
//     anywhere reaches, along the ring, the live ranks that the broadcast
//     and the digests missed: a burst of many ranks stopped at once loses
//     broadcasts in the stopped forwarders, and the job may then go quiet
//     with no later broadcast to carry a digest. "Beyond the tolerance"
//     is ⌊log2 n⌋ crashes or more learned with no pause of pushWindow δ
//     between them (n the live ranks), or a crash learned from a SYNC (a
//     broadcast was lost: a push of the same burst arriving after its
//     window, for one); fewer cost nothing, more cost two SYNCs per rank
//     and batch, and a SYNC carries at most wire.MaxSyncRanks records.
//
// A record is delivered through the normal path (ring.Learn, then
// deliver): events, observer retargeting, the agreements' Part 4 and
// zombie tracking apply, with the record's real kind (a departure stays a
// departure) and detector. Only ranks an answer names are learned.
// A digest's question waits repairDelay (Tick asks it): the broadcast
// that carries the missing rank is usually on its way (a new emitter
// receives NEWOBSERVER before the broadcast of the death that caused it),
// and only the ranks still unknown then are asked about. Requests are deduplicated:
// a rank is not asked about again within δ of the previous request (the answer may have been lost, or its source may
// have died meanwhile). Lists are at most wire.MaxSyncRanks long; longer
// ones go in several messages.
//
// Departures are not pushed: the ring's LEAVE chain hands them on.

// repairState is the dead-list repair's state.
type repairState struct {
	// asked holds, for each rank asked about and not yet learned, when the
	// last request was sent (monotonic ns).
	asked map[ranks.Rank]int64
	// later holds the questions waiting for their δ, in due order.
	later []question
	// push holds the crashes learned since the last ring push, due at
	// pushDue (0: none waiting); window counts the crashes learned with
	// no gap of pushWindow δ between them, the last at windowAt.
	push     []ranks.Rank
	pushDue  int64
	window   int
	windowAt int64
	// forced: a crash was learned from a SYNC; the next push goes
	// whatever the window holds.
	forced bool
}

// pushWindow is how many δ of quiet end the window of crashes a ring
// push counts: a burst's detections spread over seconds when its ranks
// are mended a few at a time.
const pushWindow = 4

// question is a digest's question, asked at due if still needed.
type question struct {
	to    ranks.Rank
	about []ranks.Rank
	due   int64
}

// repairBcast is the broadcast digest: after the first reception of m (T5
// done), ask about the ranks of m.D this rank does not hold dead. The
// source holds all of them; if it is known dead, from (the forwarder) is
// asked instead.
func (c *Core) repairBcast(now int64, from ranks.Rank, m *bcast.Message) {
	to := m.ID.Source
	if to == c.cfg.Self || c.ring.Dead().Has(to) {
		to = from
	}
	c.repairLater(now+c.repairDelay(), to, m.D.Members())
}

// repairSegment is the segment digest: observer j announced itself with
// NEWOBSERVER, so every rank strictly between this rank and j on the ring
// is in D_j. Ask j about those not in D_i.
func (c *Core) repairSegment(now int64, j ranks.Rank) {
	size := ranks.Rank(c.cfg.Size)
	var between []ranks.Rank
	for k := (c.cfg.Self + 1) % size; k != j && k != c.cfg.Self; k = (k + 1) % size {
		between = append(between, k)
	}
	c.repairLater(now+c.repairDelay(), j, between)
}

// repairLater queues a question about the ranks of candidates this rank
// does not hold dead, to be asked at due if they are still unknown; the
// questions stay in due order.
func (c *Core) repairLater(due int64, to ranks.Rank, candidates []ranks.Rank) {
	var about []ranks.Rank
	D := c.ring.Dead()
	for _, r := range candidates {
		if r != c.cfg.Self && r != to && !D.Has(r) {
			about = append(about, r)
		}
	}
	if len(about) == 0 {
		return
	}
	st := &c.repair
	i := len(st.later)
	for i > 0 && st.later[i-1].due > due {
		i--
	}
	st.later = slices.Insert(st.later, i, question{to: to, about: about, due: due})
}

// Stalled tells the Core that this rank was itself stopped or starved
// for length ns until now (its heartbeat thread woke up that late). Past
// δ, the job has most likely declared it dead (an EVICTED is on its way)
// and its dead list is stale: broadcasts and ring pushes went on without
// it, and a quiet job sends no later broadcast to carry their digest.
// Its suspicions are distrusted (hb.Ring.Stalled), and unless it is
// evicted first, 2δ later it asks its emitter about every rank it holds
// alive (the stall resync: SYNC questions of wire.MaxSyncRanks ranks),
// learning the crashes it missed.
func (c *Core) Stalled(now Time, length int64) {
	if c.evicted || length <= c.cfg.SuspectTimeout || c.ring.Alone() {
		return
	}
	c.ring.Stalled(now.Mono)
	c.stats.Stalls++
	c.log(slog.LevelWarn, "this rank was stalled past δ: its dead list will be checked with its emitter", "stalled", time.Duration(length), "emitter", c.ring.Emitter())
	every := make([]ranks.Rank, c.cfg.Size)
	for r := range every {
		every[r] = ranks.Rank(r)
	}
	c.repairLater(now.Mono+2*c.cfg.SuspectTimeout, c.ring.Emitter(), every)
}

// maxRepairDelay bounds how long a digest's question waits: long enough for
// a broadcast on its way (log2 n message latencies), short enough not to
// matter beside δ.
const maxRepairDelay = int64(100 * time.Millisecond)

// repairDelay is how long a digest's question waits: δ, at most
// maxRepairDelay.
func (c *Core) repairDelay() int64 { return min(c.cfg.SuspectTimeout, maxRepairDelay) }

// repairPushLater queues the ring push of crashes just learned.
func (c *Core) repairPushLater(now int64, crashed []ranks.Rank) {
	st := &c.repair
	if len(crashed) == 0 {
		return
	}
	if now-st.windowAt > pushWindow*c.cfg.SuspectTimeout {
		st.window, st.push = 0, st.push[:0] // a new window: the last one's were within the tolerance
	}
	st.window += len(crashed)
	st.windowAt = now
	if st.pushDue == 0 {
		st.pushDue = now + c.repairDelay()
	}
	st.push = append(st.push, crashed...)
}

// repairPush sends the ring push due at now, once the window holds more
// crashes than a broadcast tolerates: the records of the crashes learned
// since the last one, to the emitter and the observer.
func (c *Core) repairPush(now int64) {
	st := &c.repair
	if st.pushDue == 0 || now < st.pushDue {
		return
	}
	live := c.cfg.Size - c.ring.Dead().Len()
	if !st.forced && st.window < bits.Len(uint(max(live, 1)))-1 { // ⌊log2 live⌋
		st.pushDue = 0 // kept: a later batch of the window may cross it
		return
	}
	slices.Sort(st.push) // records go in increasing rank order
	st.push = slices.Compact(st.push)
	var recs []wire.SyncRecord
	for _, r := range st.push {
		if ev, ok := c.gone.get(r); ok && !ev.Left {
			recs = append(recs, wire.SyncRecord{Rank: r, Kind: bcast.Failed, Detector: ev.Detector, DetectedAt: ev.DetectedAt})
		}
	}
	st.push, st.pushDue, st.forced = st.push[:0], 0, false
	var to []ranks.Rank
	D := c.ring.Dead()
	for _, r := range []ranks.Rank{c.ring.Emitter(), c.ring.Observer()} {
		if r != c.cfg.Self && !D.Has(r) && !slices.Contains(to, r) {
			to = append(to, r)
		}
	}
	for len(recs) > 0 && len(to) > 0 {
		k := min(len(recs), wire.MaxSyncRanks)
		c.stats.SyncsSent += uint64(len(to))
		c.stats.SyncsPushed += uint64(len(to))
		c.send(to, &wire.Sync{Records: recs[:k]})
		recs = recs[k:]
	}
}

// repairDue asks the questions whose delay has passed and sends the ring
// push when due (Tick).
func (c *Core) repairDue(now int64) {
	c.repairPush(now)
	st := &c.repair
	k := 0
	for k < len(st.later) && st.later[k].due <= now {
		q := st.later[k]
		c.repairAsk(now, q.to, q.about)
		k++
	}
	if k > 0 {
		st.later = append(st.later[:0], st.later[k:]...)
	}
}

// repairAsk sends to the ranks of candidates (in increasing order, or
// ring order) that this rank does not hold dead and has not asked about
// within δ, in SYNC requests of at most wire.MaxSyncRanks ranks.
func (c *Core) repairAsk(now int64, to ranks.Rank, candidates []ranks.Rank) {
	st := &c.repair
	if st.asked == nil {
		st.asked = map[ranks.Rank]int64{}
	}
	D := c.ring.Dead()
	for r := range st.asked {
		if D.Has(r) { // learned since, by any path
			delete(st.asked, r)
		}
	}
	window := c.cfg.SuspectTimeout
	var ask ranks.Set
	for _, r := range candidates {
		if r == c.cfg.Self || r == to || D.Has(r) {
			continue
		}
		if at, ok := st.asked[r]; ok && now-at < window {
			continue
		}
		st.asked[r] = now
		ask.Add(r)
	}
	rs := ask.Members()
	for len(rs) > 0 {
		k := min(len(rs), wire.MaxSyncRanks)
		c.log(slog.LevelInfo, "asking for dead-list records", "to", to, "ranks", rs[:k])
		c.stats.SyncsSent++
		c.send([]ranks.Rank{to}, &wire.Sync{Ask: rs[:k]})
		rs = rs[k:]
	}
}

// onSync handles a SYNC from a live rank: it answers the ranks asked
// about that this rank holds dead, and learns the records it carries.
func (c *Core) onSync(now Time, from ranks.Rank, m *wire.Sync) {
	if len(m.Ask) > 0 {
		var recs []wire.SyncRecord // at most len(m.Ask) ≤ wire.MaxSyncRanks
		for _, r := range m.Ask {
			if ev, ok := c.gone.get(r); ok {
				kind := bcast.Failed
				if ev.Left {
					kind = bcast.Left
				}
				recs = append(recs, wire.SyncRecord{Rank: r, Kind: kind, Detector: ev.Detector, DetectedAt: ev.DetectedAt})
			}
		}
		if len(recs) > 0 {
			c.stats.SyncsSent++
			c.send([]ranks.Rank{from}, &wire.Sync{Records: recs})
		}
	}
	for _, rec := range m.Records {
		if rec.Rank == c.cfg.Self || rec.Rank == from {
			// A live rank cannot be gone. (A rank the job holds dead is
			// told so by EVICTED, not by a record.)
			c.bad("dropping SYNC record of a live rank", "from", from, "named", rec.Rank)
			continue
		}
		fresh, observerChanged := c.ring.Learn(now.Mono, []ranks.Rank{rec.Rank}) // as T5
		if observerChanged {
			c.retarget()
		}
		if len(fresh) > 0 {
			c.log(slog.LevelInfo, "learned a dead rank from SYNC", "from", from, "dead", rec.Rank, "kind", rec.Kind)
			if rec.Kind != bcast.Left {
				c.repair.forced = true // a broadcast missed it: push it on (deliver queues it)
			}
		}
		c.deliver(now, bcast.Message{Kind: rec.Kind, Dead: fresh, Detector: rec.Detector, DetectedAt: rec.DetectedAt}, fresh)
	}
}
