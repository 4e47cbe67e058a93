package detector_test

import (
	"bytes"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/ranks"
)

// TestNotesUnderCrashes: a note published by one rank reaches every rank
// that stays up exactly once, with its payload, its source and its time,
// when up to ⌊log2 n⌋−1 other ranks crash while it is being broadcast (after
// a random number of its messages were delivered), over both overlays.
func TestNotesUnderCrashes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for _, o := range []bcast.Overlay{bcast.HBA{}, bcast.BMG{}} {
		for _, n := range []int{2, 3, 5, 8, 13, 32, 64} {
			for trial := range 6 {
				t.Run(fmt.Sprintf("%T/n=%d/%d", o, n, trial), func(t *testing.T) {
					c := newCluster(t, n, func(cfg *detector.Config) { cfg.Overlay = o })
					src := ranks.Rank(rng.IntN(n))
					payload := []byte(fmt.Sprintf("report %d", trial))
					if !c.cores[src].Publish(c.time(), payload) {
						t.Fatal("Publish refused")
					}
					c.flush(src)
					payload[0] = 'X' // the Core kept its own copy
					k := max(bits.Len(uint(n))-2, 0)
					c.deliverSome(rng.IntN(len(c.queue) + 1))
					for _, r := range rng.Perm(n)[:k+1] {
						if ranks.Rank(r) != src && k > 0 {
							c.crash(ranks.Rank(r))
							k--
						}
					}
					c.deliver()
					for r := range n {
						if !c.running(ranks.Rank(r)) {
							continue
						}
						got := c.notes[r]
						if ranks.Rank(r) == src {
							if len(got) != 0 {
								t.Fatalf("the source got its own note back: %+v", got)
							}
							continue
						}
						if len(got) != 1 || got[0].Source != src || got[0].At != c.time().Wall ||
							!bytes.Equal(got[0].Payload, []byte(fmt.Sprintf("report %d", trial))) {
							t.Fatalf("rank %d got notes %+v", r, got)
						}
					}
				})
			}
		}
	}
}

// TestNoteRefused: nothing to publish to when alone, nor a payload beyond
// bcast.MaxPayload; notes are counted.
func TestNoteRefused(t *testing.T) {
	c := newCluster(t, 1, nil)
	if c.cores[0].Publish(c.time(), []byte("x")) {
		t.Error("a rank alone published")
	}
	c = newCluster(t, 3, nil)
	if c.cores[0].Publish(c.time(), make([]byte, bcast.MaxPayload+1)) {
		t.Error("an oversized note was published")
	}
	if !c.cores[0].Publish(c.time(), nil) {
		t.Fatal("an empty note was refused")
	}
	c.flush(0)
	c.deliver()
	if st := c.cores[0].Stats(); st.NotesPublished != 1 || st.BcastsStarted != 1 {
		t.Errorf("stats %+v", st)
	}
	if len(c.notes[1]) != 1 || len(c.notes[2]) != 1 || c.notes[1][0].Payload != nil {
		t.Errorf("notes %+v %+v", c.notes[1], c.notes[2])
	}
}
