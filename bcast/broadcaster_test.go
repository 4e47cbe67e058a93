package bcast

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/vigil-hpc/vigil/ranks"
)

func TestStartAndDuplicates(t *testing.T) {
	const n = 16
	D := ranks.Of(3, 9)
	dead := []ranks.Rank{3}
	src := NewBroadcaster(5, n, HBA{})
	m, to := src.Start(Failed, dead, D, 42)
	if m.ID != (ID{Source: 5, Seq: 1}) || m.Kind != Failed || m.Detector != 5 || m.DetectedAt != 42 {
		t.Fatalf("Start message %+v", m)
	}
	if want := (HBA{}).Neighbors(5, 5, n, &D); !slices.Equal(to, want) {
		t.Fatalf("Start sends to %v, want %v", to, want)
	}
	// Dead and D are copies.
	dead[0] = 7
	D.Add(4)
	if m.Dead[0] != 3 || m.D.Has(4) {
		t.Fatalf("Start did not copy Dead/D: %+v", m)
	}
	if m2, _ := src.Start(Left, []ranks.Rank{9}, m.D, 0); m2.ID.Seq != 2 {
		t.Fatalf("second Start seq %d", m2.ID.Seq)
	}
	// The source never re-delivers its own broadcast.
	if first, fwd, err := src.Receive(m, nil); first || fwd != nil || err != nil {
		t.Fatalf("source got its own message back: %v %v %v", first, fwd, err)
	}

	b := NewBroadcaster(6, n, HBA{})
	first, fwd, err := b.Receive(m, nil)
	if !first || err != nil || !slices.Equal(fwd, (HBA{}).Neighbors(6, 5, n, &m.D)) {
		t.Fatalf("first reception: %v %v %v", first, fwd, err)
	}
	for range 3 {
		if first, fwd, err := b.Receive(m, nil); first || fwd != nil || err != nil {
			t.Fatalf("duplicate: %v %v %v", first, fwd, err)
		}
	}

	// localDead removes ranks, keeping the order.
	c := NewBroadcaster(6, n, BMG{})
	all := (BMG{}).Neighbors(6, 5, n, &m.D)
	local := ranks.Of(all[0], all[2], 9)
	_, fwd, _ = c.Receive(m, &local)
	if want := slices.DeleteFunc(slices.Clone(all), local.Has); !slices.Equal(fwd, want) {
		t.Fatalf("localDead: %v, want %v", fwd, want)
	}

	// A rank in m.D delivers but does not forward.
	d := NewBroadcaster(9, n, HBA{})
	if first, fwd, err := d.Receive(m, nil); !first || fwd != nil || err != nil {
		t.Fatalf("rank in D: %v %v %v", first, fwd, err)
	}
	if first, _, _ := d.Receive(m, nil); first {
		t.Fatal("rank in D delivered twice")
	}
}

func TestValidate(t *testing.T) {
	const n = 10
	good := Message{ID: ID{Source: 2, Seq: 1}, Kind: Failed, Dead: []ranks.Rank{1}, D: ranks.Of(1), Detector: 2}
	if err := good.Validate(n); err != nil {
		t.Fatalf("valid message rejected: %v", err)
	}
	note := Message{ID: ID{Source: 2, Seq: 1}, Kind: Note, D: ranks.Of(1), Detector: 2, Payload: []byte("x")}
	if err := note.Validate(n); err != nil {
		t.Fatalf("valid note rejected: %v", err)
	}
	cases := []struct {
		field string
		edit  func(*Message)
		n     int
	}{
		{"n", func(m *Message) {}, 0},
		{"Kind", func(m *Message) { m.Kind = 0 }, n},
		{"Kind", func(m *Message) { m.Kind = 4 }, n},
		{"Dead", func(m *Message) { m.Kind = Note }, n},
		{"Payload", func(m *Message) { m.Payload = []byte{1} }, n},
		{"Payload", func(m *Message) { m.Kind, m.Dead, m.Payload = Note, nil, make([]byte, MaxPayload+1) }, n},
		{"ID.Source", func(m *Message) { m.ID.Source = n }, n},
		{"ID.Seq", func(m *Message) { m.ID.Seq = 0 }, n},
		{"Dead", func(m *Message) { m.Dead = nil }, n},
		{"Dead[1]", func(m *Message) { m.Dead = []ranks.Rank{1, n + 5} }, n},
		{"Detector", func(m *Message) { m.Detector = 1 << 31 }, n},
		{"D", func(m *Message) { m.D = ranks.Of(1, n) }, n},
		{"D", func(m *Message) { m.D = ranks.Of(2) }, n},
	}
	for _, c := range cases {
		m := good
		m.Dead = slices.Clone(good.Dead)
		c.edit(&m)
		err := m.Validate(c.n)
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), ": "+c.field+": ") {
			t.Errorf("field %s: got %v", c.field, err)
			continue
		}
		if c.n != n {
			continue
		}
		// Receive rejects it without marking the ID seen.
		b := NewBroadcaster(4, n, HBA{})
		if first, fwd, err2 := b.Receive(m, nil); first || fwd != nil || err2 == nil {
			t.Errorf("field %s: Receive accepted: %v %v %v", c.field, first, fwd, err2)
		}
		if first, _, err := b.Receive(good, nil); !first || err != nil {
			t.Errorf("field %s: valid message after the bad one: %v %v", c.field, first, err)
		}
	}
	b := NewBroadcaster(n, n, HBA{})
	if _, _, err := b.Receive(good, nil); err == nil || !strings.Contains(err.Error(), ": self: ") {
		t.Errorf("self >= n: %v", err)
	}
}

// TestSeenModel drives one source's duplicate memory with random orders and
// gaps against a model: nothing is new twice, the memory never exceeds
// maxPending, and a sequence delivered at most maxPending places late is
// always new.
func TestSeenModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := 0; trial < 200; trial++ {
		var s seenSeqs
		total := 1 + rng.IntN(2000)
		disp := rng.IntN(2 * maxPending)
		gap := rng.IntN(3) == 0
		order := displaced(rng, total, disp)
		was := map[uint64]bool{}
		for _, seq := range order {
			if gap && seq%17 == 5 {
				continue
			}
			for range 1 + rng.IntN(2) { // maybe a duplicate right away
				isNew := s.mark(seq)
				if isNew && was[seq] {
					t.Fatalf("seq %d new twice", seq)
				}
				if !isNew && !was[seq] && !gap && disp <= maxPending {
					t.Fatalf("disp %d: seq %d dropped (w=%d, %d pending)", disp, seq, s.w, len(s.above))
				}
				was[seq] = was[seq] || isNew
				if len(s.above) > maxPending {
					t.Fatalf("%d pending", len(s.above))
				}
			}
		}
		if !gap && disp <= maxPending && (s.w != uint64(total) || len(s.above) != 0) {
			t.Fatalf("end: w=%d pending=%d, want %d 0", s.w, len(s.above), total)
		}
	}
}

// displaced returns 1..total where each value moves at most about disp
// places from its position (a shuffle inside sliding blocks).
func displaced(rng *rand.Rand, total, disp int) []uint64 {
	order := make([]uint64, total)
	for i := range order {
		order[i] = uint64(i + 1)
	}
	if disp > 0 {
		for start := 0; start < total; start += disp {
			blk := order[start:min(start+disp, total)]
			rng.Shuffle(len(blk), func(i, j int) { blk[i], blk[j] = blk[j], blk[i] })
		}
	}
	return order
}

// TestBoundedMemory delivers 1e5 broadcasts from several sources to one
// Broadcaster, out of order: each once (plus duplicates), with some never
// arriving. Every broadcast that arrives is delivered exactly once and the
// memory stays bounded; with no gap it shrinks to one watermark per source.
func TestBoundedMemory(t *testing.T) {
	const (
		n       = 64
		sources = 5
		total   = 100000
	)
	rng := rand.New(rand.NewPCG(13, 14))
	for _, lossy := range []bool{false, true} {
		b := NewBroadcaster(0, n, silent{})
		var msgs []Message
		for s := ranks.Rank(1); s <= sources; s++ {
			src := NewBroadcaster(s, n, silent{})
			for range total / sources {
				m, _ := src.Start(Failed, []ranks.Rank{63}, ranks.Set{}, 0)
				msgs = append(msgs, m)
			}
		}
		// Interleave sources, then displace each message by up to 48
		// places (< maxPending per source).
		rng.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })
		slices.SortStableFunc(msgs, func(a, c Message) int { return int(a.ID.Seq) - int(c.ID.Seq) })
		for start := 0; start < len(msgs); start += 48 {
			blk := msgs[start:min(start+48, len(msgs))]
			rng.Shuffle(len(blk), func(i, j int) { blk[i], blk[j] = blk[j], blk[i] })
		}
		delivered := make(map[ID]bool, len(msgs))
		for i, m := range msgs {
			if lossy && rng.IntN(1000) == 0 {
				continue
			}
			first, _, err := b.Receive(m, nil)
			if err != nil || !first {
				t.Fatalf("lossy=%v: message %d %+v: first=%v err=%v", lossy, i, m.ID, first, err)
			}
			delivered[m.ID] = true
			if rng.IntN(4) == 0 { // a duplicate, or a lost one arriving late
				old := msgs[rng.IntN(i+1)]
				if first, _, _ := b.Receive(old, nil); first {
					if delivered[old.ID] {
						t.Fatalf("%+v delivered twice", old.ID)
					}
					delivered[old.ID] = true
				}
			}
			if i%1000 == 0 {
				checkBounded(t, b, sources)
			}
		}
		checkBounded(t, b, sources)
		if !lossy {
			for s, st := range b.seen {
				if st.w != total/sources || st.above != nil {
					t.Fatalf("source %d: w=%d, %d pending", s, st.w, len(st.above))
				}
			}
		}
		t.Logf("lossy=%v: %d delivered", lossy, len(delivered))
	}
}

func checkBounded(t *testing.T, b *Broadcaster, sources int) {
	t.Helper()
	if len(b.seen) > sources {
		t.Fatalf("%d sources tracked", len(b.seen))
	}
	for s, st := range b.seen {
		if len(st.above) > maxPending || cap(st.above) > 2*maxPending+8 {
			t.Fatalf("source %d: %d pending (cap %d)", s, len(st.above), cap(st.above))
		}
	}
}

// silent is an overlay that forwards to nobody, for tests of the
// Broadcaster's own bookkeeping.
type silent struct{}

func (silent) Name() string                                                { return "silent" }
func (silent) Neighbors(_, _ ranks.Rank, _ int, _ *ranks.Set) []ranks.Rank { return nil }
