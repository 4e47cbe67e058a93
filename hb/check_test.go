package hb_test

import (
	"math"
	"sync"

	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/ranks"
)

// watched is what the checks of one ring have seen of its emitter.
type watched struct {
	emitter ranks.Rank
	seq     uint64
	grewAt  int64
}

var (
	watchMu sync.Mutex
	watches = map[*hb.Ring]*watched{}
)

// check is one check of r's emitter at now that loads its slot word seq:
// it keeps the record a heartbeat thread's checks would (heartbeat.Watch,
// without a stall) and hands it to r.Observe. A new emitter's record starts
// over, from a growth long ago.
func check(r *hb.Ring, now int64, seq uint64) hb.Output {
	watchMu.Lock()
	w := watches[r]
	if w == nil || w.emitter != r.Emitter() {
		w = &watched{emitter: r.Emitter(), grewAt: math.MinInt64 / 2}
		watches[r] = w
	}
	if seq > w.seq {
		w.seq, w.grewAt = seq, now
	}
	rec := hb.WatchRecord{Emitter: w.emitter, Seq: w.seq, GrewAt: w.grewAt, CheckedAt: now}
	watchMu.Unlock()
	return r.Observe(now, rec)
}
