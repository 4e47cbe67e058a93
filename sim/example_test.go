package sim_test

import (
	"fmt"
	"time"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/sim"
)

// A job of 1,024 ranks running the shipped detector in virtual time: two
// neighbours on the ring crash at once, and the survivors stabilise (every
// one knows exactly the dead, and the ring is closed again) within seed
// 000's Theorem 1 bound. The run is a function of its seed.
func ExampleNewDetector() {
	const n = 1024
	h, delta, t := 10*time.Millisecond, 50*time.Millisecond, time.Millisecond
	d, err := sim.NewDetector(sim.DetectorConfig{
		N: n, H: int64(h), Delta: int64(delta), Check: int64(h),
		Net:      sim.OnePort{T: int64(t)},
		Failures: sim.Script{{At: 0, Rank: 100}, {At: 0, Rank: 101}},
	}, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	res := d.Run()
	bound := hb.Bound(2, n, int64(delta), int64(h/3+h)) // t = h/3 + check, as the demo
	fmt.Printf("dead %v, stabilised: %v, within T(2): %v\n", res.Dead, res.Stabilized >= 0, res.Stabilized <= bound)
	// Output: dead [100 101], stabilised: true, within T(2): true
}

// One broadcast of a failure notice over the double hypercube (seed 000)
// to 4,096 ranks, 3 of them dead without the source knowing: every live
// rank delivers it.
func ExampleSimulateBroadcast() {
	res, err := sim.SimulateBroadcast(sim.BroadcastConfig{
		N: 4096, Overlay: bcast.HBA{}, Net: sim.OnePort{T: int64(time.Millisecond)},
		Source: 0, Dead: []ranks.Rank{7, 300, 2049},
	}, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d of %d live ranks reached, consistent: %v\n", res.Reached, res.Participants, res.Consistent())
	// Output: 4092 of 4092 live ranks reached, consistent: true
}
