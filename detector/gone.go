package detector

import (
	"slices"

	"github.com/vigil-hpc/vigil/ranks"
)

// gone is the Core's record of the ranks known gone, crashed or departed:
// the only one. Drivers read it (Known, Gone) instead of keeping their own.
type gone struct {
	// events are in delivery order and only grow: a GoneView shares them.
	events []Event
	at     map[ranks.Rank]int // each rank's index in events
}

func (g *gone) get(r ranks.Rank) (Event, bool) {
	i, ok := g.at[r]
	if !ok {
		return Event{}, false
	}
	return g.events[i], true
}

// left reports whether r is recorded as departed cleanly.
func (c *Core) left(r ranks.Rank) bool {
	ev, _ := c.gone.get(r)
	return ev.Left
}

// add records ev unless its rank is recorded; it reports whether it did.
func (g *gone) add(ev Event) bool {
	if _, dup := g.at[ev.Rank]; dup {
		return false
	}
	if g.at == nil {
		g.at = map[ranks.Rank]int{}
	}
	g.at[ev.Rank] = len(g.events)
	g.events = append(g.events, ev)
	return true
}

// GoneView is a snapshot of a Core's record of the ranks gone, as Gone
// returned it. It is immutable: a driver may publish it to other
// goroutines (through an atomic.Pointer, a channel) and read it there,
// while the Core goes on.
type GoneView struct {
	events []Event // a prefix of the Core's: entries below len never change
	sorted []int32 // indexes into events, by increasing rank
}

// Gone returns the record of the ranks gone as a GoneView. prev, a view
// this Core returned before (or nil), is returned as it is when nothing
// was delivered since, and otherwise reused: the new view shares its
// events and costs one merge of the new ranks into its order. Only the
// driver that owns the Core calls it.
func (c *Core) Gone(prev *GoneView) *GoneView {
	evs := c.gone.events
	if prev != nil && len(prev.events) == len(evs) {
		return prev
	}
	var old []int32
	if prev != nil {
		old = prev.sorted
	}
	fresh := make([]int32, 0, len(evs)-len(old))
	for i := len(old); i < len(evs); i++ {
		fresh = append(fresh, int32(i))
	}
	byRank := func(a, b int32) int { return int(evs[a].Rank) - int(evs[b].Rank) }
	slices.SortFunc(fresh, byRank)
	sorted := make([]int32, 0, len(evs))
	i, j := 0, 0
	for i < len(old) && j < len(fresh) {
		if byRank(old[i], fresh[j]) < 0 {
			sorted = append(sorted, old[i])
			i++
		} else {
			sorted = append(sorted, fresh[j])
			j++
		}
	}
	sorted = append(append(sorted, old[i:]...), fresh[j:]...)
	return &GoneView{events: evs[:len(evs):len(evs)], sorted: sorted}
}

// Len returns how many ranks are gone.
func (v *GoneView) Len() int {
	if v == nil {
		return 0
	}
	return len(v.events)
}

// Event returns the i-th rank delivered gone (0 ≤ i < Len), in delivery
// order.
func (v *GoneView) Event(i int) Event { return v.events[i] }

// Rank returns the i-th rank gone (0 ≤ i < Len) in increasing order.
func (v *GoneView) Rank(i int) ranks.Rank { return v.events[v.sorted[i]].Rank }

// Known returns the event of rank r, if it is gone.
func (v *GoneView) Known(r ranks.Rank) (Event, bool) {
	if v == nil {
		return Event{}, false
	}
	i, ok := slices.BinarySearchFunc(v.sorted, r, func(k int32, r ranks.Rank) int {
		return int(v.events[k].Rank) - int(r)
	})
	if !ok {
		return Event{}, false
	}
	return v.events[v.sorted[i]], true
}
