package detector

import (
	"slices"
	"sync"

	"github.com/vigil-hpc/vigil/ranks"
)

// gone is the Core's record of the ranks known gone, crashed or departed:
// the only one. Drivers read it (Known, Gone) instead of keeping their own.
type gone struct {
	// events are in delivery order and only grow: a GoneView shares them.
	events []Event
	// at is each rank's index in events while few ranks are gone; dense
	// replaces it once more than denseShare of the job is (a simulated job
	// holds thousands of Cores, each holding most of the job gone after a
	// cut): dense[r] is r's index + 1, 0 for a rank not gone, 4 bytes a
	// rank of the job where a map takes about 20 a rank gone.
	at    map[ranks.Rank]int
	dense []int32
}

// denseShare is the share of the job gone (1/denseShare) from which gone
// indexes its events densely.
const denseShare = 8

func (g *gone) get(r ranks.Rank) (Event, bool) {
	i, ok := g.index(r)
	if !ok {
		return Event{}, false
	}
	return g.events[i], true
}

// index returns r's index in events.
func (g *gone) index(r ranks.Rank) (int, bool) {
	if g.dense != nil {
		if int(r) >= len(g.dense) || g.dense[r] == 0 {
			return 0, false
		}
		return int(g.dense[r]) - 1, true
	}
	i, ok := g.at[r]
	return i, ok
}

// has reports whether r is recorded.
func (g *gone) has(r ranks.Rank) bool {
	_, ok := g.index(r)
	return ok
}

// left reports whether r is recorded as departed cleanly.
func (c *Core) left(r ranks.Rank) bool {
	ev, _ := c.gone.get(r)
	return ev.Left
}

// add records ev unless its rank is recorded; it reports whether it did.
// size is the job's number of ranks.
func (g *gone) add(ev Event, size int) bool {
	if g.has(ev.Rank) {
		return false
	}
	switch {
	case g.dense != nil:
		g.dense[ev.Rank] = int32(len(g.events) + 1)
	case len(g.events)+1 > size/denseShare:
		g.dense = make([]int32, size)
		for i, e := range g.events {
			g.dense[e.Rank] = int32(i + 1)
		}
		g.dense[ev.Rank] = int32(len(g.events) + 1)
		g.at = nil
	default:
		if g.at == nil {
			g.at = map[ranks.Rank]int{}
		}
		g.at[ev.Rank] = len(g.events)
	}
	g.events = append(g.events, ev)
	return true
}

// GoneView is a snapshot of a Core's record of the ranks gone, as Gone
// returned it. It is immutable: a driver may publish it to other
// goroutines (through an atomic.Pointer, a channel) and read it there,
// while the Core goes on.
//
// Its order by rank is kept as sorted runs, as a log-structured merge
// does: each view shares the runs of the one before, adds a run of the
// ranks new to it, and merges its last runs while the last is at least
// half the one before (each run then more than twice the next). A rank
// is merged O(log n) times over all views, and a view costs the event
// loop O(k log k + log n) for k ranks new to it, whether a burst comes
// in one delivery or in many: a single sorted copy per view would cost
// O(n) each. Known searches the O(log n) runs; the first Rank merges
// them once.
type GoneView struct {
	events []Event   // a prefix of the Core's: entries below len never change
	runs   [][]int32 // indexes into events, each run by increasing rank; shared
	once   sync.Once // builds sorted
	sorted []int32   // the runs merged, for Rank
}

// Gone returns the record of the ranks gone as a GoneView. prev, a view
// this Core returned before (or nil), is returned as it is when nothing
// was delivered since, and otherwise reused: the new view shares its
// runs. Only the driver that owns the Core calls it.
func (c *Core) Gone(prev *GoneView) *GoneView {
	evs := c.gone.events
	if prev != nil && len(prev.events) == len(evs) {
		return prev
	}
	from := 0
	var runs [][]int32
	if prev != nil {
		from = len(prev.events)
		runs = slices.Clip(prev.runs) // appending must not write into prev's
	}
	byRank := func(a, b int32) int { return int(evs[a].Rank) - int(evs[b].Rank) }
	fresh := make([]int32, 0, len(evs)-from)
	for i := from; i < len(evs); i++ {
		fresh = append(fresh, int32(i))
	}
	slices.SortFunc(fresh, byRank)
	runs = append(runs, fresh)
	for k := len(runs); k >= 2 && len(runs[k-2]) <= 2*len(runs[k-1]); k-- {
		runs = append(runs[:k-2], mergeRuns(runs[k-2], runs[k-1], byRank))
	}
	return &GoneView{events: evs[:len(evs):len(evs)], runs: runs}
}

// mergeRuns returns the merge of runs a and b (sorted by cmp) in a new
// slice.
func mergeRuns(a, b []int32, cmp func(a, b int32) int) []int32 {
	out := make([]int32, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if cmp(a[i], b[j]) < 0 {
			out = append(out, a[i])
			i++
		} else {
			out = append(out, b[j])
			j++
		}
	}
	return append(append(out, a[i:]...), b[j:]...)
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
// The first call on a view merges its runs, O(Len).
func (v *GoneView) Rank(i int) ranks.Rank {
	v.once.Do(func() {
		byRank := func(a, b int32) int { return int(v.events[a].Rank) - int(v.events[b].Rank) }
		var all []int32
		for k := len(v.runs) - 1; k >= 0; k-- { // smallest first: O(Len) in all
			all = mergeRuns(v.runs[k], all, byRank)
		}
		v.sorted = all
	})
	return v.events[v.sorted[i]].Rank
}

// Known returns the event of rank r, if it is gone.
func (v *GoneView) Known(r ranks.Rank) (Event, bool) {
	if v == nil {
		return Event{}, false
	}
	for _, run := range v.runs {
		i, ok := slices.BinarySearchFunc(run, r, func(k int32, r ranks.Rank) int {
			return int(v.events[k].Rank) - int(r)
		})
		if ok {
			return v.events[run[i]], true
		}
	}
	return Event{}, false
}
