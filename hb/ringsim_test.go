package hb_test

import (
	"container/heap"
	"fmt"
	"math/rand/v2"

	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/ranks"
)

// ringSim is a small discrete-event driver of N ring cores in virtual time:
// heartbeats every h with a random phase, messages taking U(0, t], observer
// checks every c, and an idealised broadcast that reaches every alive rank
// within B(n). It exists to test the ring core against Lemma 1 and Theorem 1.
type ringSim struct {
	n              int
	h, delta, t, c int64
	rng            *rand.Rand
	now            int64
	q              eventQueue
	nodes          []*simNode
	killedAt       map[ranks.Rank]int64
	falseSuspicion []string
	detections     int
	evSeq          int
}

type simNode struct {
	ring   *hb.Ring
	slots  words
	alive  bool
	seq    uint64
	learnt map[ranks.Rank]int64 // dead rank -> time this node learned it
}

// words is one node's heartbeat words: the largest sequence number it
// received from each emitter.
type words []uint64

func (w words) Load(emitter ranks.Rank) uint64 { return w[emitter] }

func (w words) Store(emitter ranks.Rank, seq uint64) { w[emitter] = max(w[emitter], seq) }

type event struct {
	at  int64
	seq int
	fn  func()
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any     { o := *q; e := o[len(o)-1]; *q = o[:len(o)-1]; return e }
func (s *ringSim) at(t int64, fn func()) {
	s.evSeq++
	heap.Push(&s.q, &event{at: t, seq: s.evSeq, fn: fn})
}

const ms = int64(1e6)

func newRingSim(n int, seed uint64) *ringSim {
	s := &ringSim{n: n, h: 10 * ms, delta: 50 * ms, t: 2 * ms, c: 5 * ms,
		rng: rand.New(rand.NewPCG(seed, 99)), killedAt: map[ranks.Rank]int64{}}
	for i := 0; i < n; i++ {
		r, err := hb.NewRing(hb.RingConfig{Self: ranks.Rank(i), N: n, Delta: s.delta})
		if err != nil {
			panic(err)
		}
		r.Start(0, 2*s.delta)
		nd := &simNode{ring: r, slots: make(words, n), alive: true, learnt: map[ranks.Rank]int64{}}
		s.nodes = append(s.nodes, nd)
		i := ranks.Rank(i)
		phase := s.rng.Int64N(s.h)
		s.at(phase, func() { s.heartbeatTick(i) })
		s.at(s.rng.Int64N(s.c), func() { s.checkTick(i) })
	}
	return s
}

func (s *ringSim) delay() int64 { return 1 + s.rng.Int64N(s.t) }

// heartbeatTick is T1 on node i.
func (s *ringSim) heartbeatTick(i ranks.Rank) {
	nd := s.nodes[i]
	if !nd.alive {
		return
	}
	s.sendHeartbeat(i)
	s.at(s.now+s.h, func() { s.heartbeatTick(i) })
}

func (s *ringSim) sendHeartbeat(i ranks.Rank) {
	nd := s.nodes[i]
	nd.seq++
	seq, to := nd.seq, nd.ring.Observer()
	if to == i {
		return
	}
	s.at(s.now+s.delay(), func() {
		if s.nodes[to].alive {
			s.nodes[to].slots.Store(i, seq)
		}
	})
}

func (s *ringSim) checkTick(i ranks.Rank) {
	nd := s.nodes[i]
	if !nd.alive {
		return
	}
	out := check(nd.ring, s.now, nd.slots.Load(nd.ring.Emitter()))
	s.apply(i, out)
	s.at(s.now+s.c, func() { s.checkTick(i) })
}

func (s *ringSim) apply(i ranks.Rank, out hb.Output) {
	nd := s.nodes[i]
	if out.ObserverChanged {
		s.sendHeartbeat(i)
	}
	if out.SendNewObserver {
		to := out.NewObserverTo
		s.at(s.now+s.delay(), func() {
			if !s.nodes[to].alive {
				return
			}
			o, err := s.nodes[to].ring.NewObserver(s.now, i)
			if err != nil {
				panic(err)
			}
			s.apply(to, o)
		})
	}
	if d := out.Detected; d != nil {
		s.detections++
		if _, dead := s.killedAt[d.Dead]; !dead {
			s.falseSuspicion = append(s.falseSuspicion, fmt.Sprintf("t=%dms: %d suspected live %d", s.now/ms, i, d.Dead))
		}
		nd.learnt[d.Dead] = s.now
		// Idealised broadcast: every rank alive at delivery learns it
		// within B(n); the source may die right after starting it.
		b := hb.BroadcastTime(s.n, s.t)
		for j := range s.nodes {
			if ranks.Rank(j) == i {
				continue
			}
			j := ranks.Rank(j)
			s.at(s.now+1+s.rng.Int64N(b), func() {
				nj := s.nodes[j]
				if !nj.alive {
					return
				}
				fresh, oc := nj.ring.Learn(s.now, []ranks.Rank{d.Dead})
				for _, f := range fresh {
					nj.learnt[f] = s.now
				}
				if oc {
					s.sendHeartbeat(j)
				}
			})
		}
	}
}

func (s *ringSim) kill(r ranks.Rank, at int64) {
	s.at(at, func() {
		s.nodes[r].alive = false
		s.killedAt[r] = s.now
	})
}

// run advances virtual time to end.
func (s *ringSim) run(end int64) {
	for s.q.Len() > 0 && s.q[0].at <= end {
		e := heap.Pop(&s.q).(*event)
		s.now = e.at
		e.fn()
	}
	s.now = end
}

// runUntilStable runs until the configuration is stable (seed 000 §3.1.3)
// and returns that time, or -1 if it is not stable by end.
func (s *ringSim) runUntilStable(after, end int64) int64 {
	for s.q.Len() > 0 && s.q[0].at <= end {
		e := heap.Pop(&s.q).(*event)
		s.now = e.at
		e.fn()
		if s.now >= after && s.stable() {
			return s.now
		}
	}
	return -1
}

func (s *ringSim) aliveSet() []ranks.Rank {
	var a []ranks.Rank
	for i, nd := range s.nodes {
		if nd.alive {
			a = append(a, ranks.Rank(i))
		}
	}
	return a
}

// stable: every alive rank observes its closest alive predecessor, is
// observed by its closest alive successor, and D_p is exactly the dead set.
func (s *ringSim) stable() bool {
	alive := s.aliveSet()
	if len(alive) < 2 {
		return true
	}
	for k, p := range alive {
		pred := alive[(k+len(alive)-1)%len(alive)]
		succ := alive[(k+1)%len(alive)]
		r := s.nodes[p].ring
		if r.Emitter() != pred || r.Observer() != succ || r.Dead().Len() != len(s.killedAt) {
			return false
		}
		for _, d := range r.Dead().Members() {
			if _, ok := s.killedAt[d]; !ok {
				return false
			}
		}
	}
	return true
}

// describe is the ring state for failure messages.
func (s *ringSim) describe() string {
	out := ""
	for i, nd := range s.nodes {
		if nd.alive {
			out += fmt.Sprintf("\n  %d: emitter %d observer %d D %v", i, nd.ring.Emitter(), nd.ring.Observer(), nd.ring.Dead().Members())
		}
	}
	return out
}

// effT is the message bound used in T(f): the paper's t plus the check
// granularity c, since a heartbeat is seen up to c after it lands.
func (s *ringSim) effT() int64 { return s.t + s.c }
