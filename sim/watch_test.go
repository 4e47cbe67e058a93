package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/vigil-hpc/vigil/heartbeat"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// TestWatchMatchesHeartbeatWatch: the simulator's checks (watch) and the
// runtime's (heartbeat.Watch, the C check) produce the same records and
// ring the same alarms for the same random sequence of sets, stored words
// and checks, stalls (checks far apart) included.
func TestWatchMatchesHeartbeatWatch(t *testing.T) {
	const n, guard, silence = 8, 500, 300
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 29))
		slots := transport.NewSlots(n)
		hw := heartbeat.NewWatch(slots, guard)
		rang := false
		hw.SetAlarm(silence, func() { rang = true })
		sw := &watch{guard: guard, silence: silence}
		now := int64(1000)
		hw.Set(3, now)
		sw.set(3, now)
		for step := range 2000 {
			switch k := rng.IntN(20); {
			case k == 0:
				e := ranks.Rank(rng.IntN(n))
				hw.Set(e, now)
				sw.set(e, now)
			case k < 8:
				r := ranks.Rank(rng.IntN(n))
				slots.Store(r, slots.Load(r)+uint64(rng.IntN(3)))
			default:
				if rng.IntN(30) == 0 {
					now += guard + int64(rng.IntN(1000)) // a stall
				} else {
					now += 1 + int64(rng.IntN(200))
				}
				rang = false
				hw.Check(now)
				want := sw.check(now, slots.Load)
				if got := hw.Record(); got != sw.rec || rang != want {
					t.Fatalf("seed %d step %d at %d: heartbeat.Watch %+v alarm %v, sim %+v alarm %v", seed, step, now, got, rang, sw.rec, want)
				}
			}
		}
	}
}
