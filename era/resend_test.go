package era

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/vigil-hpc/vigil/ranks"
)

// lossyNet delivers messages in random order and loses each with
// probability loss; processes may crash (reported to all by a perfect
// detector). Between rounds every live core's Resend runs.
type lossyNet struct {
	rng     *rand.Rand
	cores   []*Core
	alive   []bool
	queue   []lossyMsg
	loss    float64
	decided []*Decision
	sent    int
}

type lossyMsg struct {
	from, to ranks.Rank
	m        Msg
}

func (l *lossyNet) do(from ranks.Rank, outs []Out) {
	for _, o := range outs {
		if o.Decided != nil {
			if l.decided[from] != nil {
				panic(fmt.Sprintf("rank %d decided twice", from))
			}
			l.decided[from] = o.Decided
			continue
		}
		l.sent++
		if l.rng.Float64() >= l.loss {
			l.queue = append(l.queue, lossyMsg{from, o.To, o.Msg})
		}
	}
}

// drain delivers the queue in random order (messages sent meanwhile too).
func (l *lossyNet) drain() {
	for len(l.queue) > 0 {
		i := l.rng.IntN(len(l.queue))
		m := l.queue[i]
		l.queue[i] = l.queue[len(l.queue)-1]
		l.queue = l.queue[:len(l.queue)-1]
		if l.alive[m.to] && l.alive[m.from] {
			l.do(m.to, l.cores[m.to].Step(m.from, m.m))
		}
	}
}

func (l *lossyNet) crash(r ranks.Rank) {
	l.alive[r] = false
	for p, c := range l.cores {
		if l.alive[p] {
			l.do(ranks.Rank(p), c.Dead(r))
		}
	}
}

// TestResendOverLossyLinks: with 30 % of the messages lost and up to two
// crashes (the root among them half the time), periodic Resend makes every
// survivor decide, and all decide alike.
func TestResendOverLossyLinks(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 99))
		n := 2 + rng.IntN(12)
		l := &lossyNet{rng: rng, loss: 0.3, alive: make([]bool, n), decided: make([]*Decision, n)}
		for p := range n {
			l.cores = append(l.cores, NewCore(ranks.Rank(p), n, Binary(n), BitOR))
			l.alive[p] = true
		}
		var victims []ranks.Rank
		if n > 2 {
			for range rng.IntN(3) {
				victims = append(victims, ranks.Rank(rng.IntN(n)))
			}
			if rng.IntN(2) == 0 {
				victims = append(victims, 0)
			}
		}
		id := ID{Seq: 1}
		for p := range n {
			outs, err := l.cores[p].Start(id, Contribution{Value: []byte{byte(1 << (p % 8)), byte(p)}})
			if err != nil {
				t.Fatal(err)
			}
			l.do(ranks.Rank(p), outs)
		}
		rounds := 0
		for ; rounds < 100; rounds++ {
			// Deliver part of the traffic, crash a victim, deliver the rest.
			if len(victims) > 0 && rng.IntN(2) == 0 {
				if v := victims[0]; l.alive[v] {
					l.queue = l.queue[:rng.IntN(len(l.queue)+1)]
					l.crash(v)
				}
				victims = victims[1:]
			}
			l.drain()
			done := true
			for p := range n {
				done = done && (!l.alive[p] || l.decided[p] != nil)
			}
			if done && len(victims) == 0 {
				break
			}
			for p, c := range l.cores {
				if l.alive[p] {
					l.do(ranks.Rank(p), c.Resend())
				}
			}
		}
		var ref *Decision
		for p := range n {
			if !l.alive[p] {
				continue
			}
			d := l.decided[p]
			if d == nil {
				t.Fatalf("seed %d (n=%d): rank %d undecided after %d rounds", seed, n, p, rounds)
			}
			if ref == nil {
				ref = d
			}
			if !bytes.Equal(d.Value, ref.Value) || !d.Dead.Equal(ref.Dead) || d.Unacked != ref.Unacked {
				t.Fatalf("seed %d (n=%d): rank %d decided %+v, another survivor %+v", seed, n, p, d, ref)
			}
			for q := range n {
				if l.alive[q] && d.Dead.Has(ranks.Rank(q)) {
					t.Fatalf("seed %d: live rank %d in the dead set %v", seed, q, d.Dead)
				}
			}
		}
	}
}

// TestResendSkipsShortAgreements: an agreement is repeated only once it has
// been open across a whole Resend period.
func TestResendSkipsShortAgreements(t *testing.T) {
	c := NewCore(1, 2, Binary(2), BitOR)
	if _, err := c.Start(ID{Seq: 1}, Contribution{Value: []byte{1}}); err != nil {
		t.Fatal(err)
	}
	if out := c.Resend(); len(out) != 0 {
		t.Fatalf("first Resend repeated %+v", out)
	}
	out := c.Resend()
	if len(out) != 1 || out[0].To != 0 || out[0].Msg.Kind != Up {
		t.Fatalf("second Resend: %+v, want the UP to rank 0", out)
	}
}
