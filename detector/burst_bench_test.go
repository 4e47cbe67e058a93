package detector_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
)

// burstN is the job size of BenchmarkLearnBurst.
const burstN = 65_536

// burstBench is one burst a survivor learns: the k dead ranks (random,
// in drawing order) and the live ranks whose broadcasts carry them.
type burstBench struct {
	dead    []ranks.Rank
	sources []ranks.Rank
}

// newBurstBench draws k dead ranks and k live sources among burstN,
// neither holding rank 0 (the survivor).
func newBurstBench(k int) burstBench {
	rng := rand.New(rand.NewPCG(uint64(k), 29))
	perm := rng.Perm(burstN - 1)
	var b burstBench
	for _, p := range perm[:k] {
		b.dead = append(b.dead, ranks.Rank(p+1))
	}
	for _, p := range perm[k : 2*k] {
		b.sources = append(b.sources, ranks.Rank(p+1))
	}
	return b
}

// learnDriver is what node.flush does after each message: the zombie
// check's words, the Ready, and the published record of the ranks gone.
type learnDriver struct {
	core  *detector.Core
	words []uint64
	view  *detector.GoneView
}

func (d *learnDriver) step(now detector.Time, from ranks.Rank, m wire.Message) {
	d.core.Step(now, from, m)
	if rs := d.core.WantWords(); rs != nil {
		d.core.Words(now, rs, d.words[:len(rs)])
	}
	if rd := d.core.Ready(); len(rd.Events) > 0 {
		d.view = d.core.Gone(d.view)
	}
}

// BenchmarkLearnBurst is the work of one survivor (rank 0 of 65,536, the
// runtime's Core configuration) that learns a burst of k deaths: from one
// broadcast carrying all k (a block, a cut's probe round), or from k
// broadcasts of one death each (k independent observers; each carries its
// source's D, the one rank). Its driver does what node.flush does after
// each message. ns/death is the time per death learned, cpu-ns/death the
// CPU time (the process's, every thread): linear work per failure keeps
// them flat in k.
func BenchmarkLearnBurst(b *testing.B) { benchLearnBurst(b, false) }

// BenchmarkLearnBurstAgreeing is BenchmarkLearnBurst with an agreement
// open on the survivor when the burst comes: each death also goes to the
// agreement's core (ERA Part 4).
func BenchmarkLearnBurstAgreeing(b *testing.B) { benchLearnBurst(b, true) }

func benchLearnBurst(b *testing.B, agreeing bool) {
	for _, k := range []int{16, 256, 4096, 16384} {
		burst := newBurstBench(k)
		for _, batched := range []bool{true, false} {
			name := fmt.Sprintf("k=%d/one-broadcast", k)
			if !batched {
				name = fmt.Sprintf("k=%d/%d-broadcasts", k, k)
			}
			b.Run(name, func(b *testing.B) {
				msgs := burstMessages(burst, batched) // read only: shared by the iterations
				words := make([]uint64, burstN)
				var cpu int64
				for b.Loop() {
					b.StopTimer()
					core, err := detector.NewCore(detector.Config{Self: 0, Size: burstN, SuspectTimeout: delta, Zombies: true,
						Probe: 16, ProbeAfter: delta / 2})
					if err != nil {
						b.Fatal(err)
					}
					core.Start(0, 2*delta)
					if agreeing {
						if _, err := core.Agree(detector.OpAND, nil, []byte{1}); err != nil {
							b.Fatal(err)
						}
					}
					core.Ready()
					d := &learnDriver{core: core, words: words}
					now := detector.Time{Mono: delta, Wall: delta}
					b.StartTimer()
					cpu -= cpuTime()
					for _, m := range msgs {
						d.step(now, m.ID.Source, &wire.Bcast{Message: m})
						now.Mono++
					}
					cpu += cpuTime()
					b.StopTimer()
					if got := core.Dead().Len(); got != k {
						b.Fatalf("learned %d deaths, want %d", got, k)
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*k), "ns/death")
				b.ReportMetric(float64(cpu)/float64(b.N*k), "cpu-ns/death")
			})
		}
	}
}

// cpuTime returns the CPU time this process has used (user and system,
// every thread: the collector's too), in nanoseconds: on a shared
// machine, wall time per death also measures the load.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// burstMessages returns the broadcasts that bring burst to rank 0: one
// carrying every death (D, the source's dead list, is the burst), or one
// per death (D is that death).
func burstMessages(burst burstBench, batched bool) []bcast.Message {
	if batched {
		D, _ := ranks.FromSorted(slices.Sorted(slices.Values(burst.dead)))
		return []bcast.Message{{ID: bcast.ID{Source: burst.sources[0], Seq: 1}, Kind: bcast.Failed,
			Dead: slices.Clone(burst.dead), D: D, Detector: burst.sources[0]}}
	}
	msgs := make([]bcast.Message, len(burst.dead))
	for i, r := range burst.dead {
		msgs[i] = bcast.Message{ID: bcast.ID{Source: burst.sources[i], Seq: 1}, Kind: bcast.Failed,
			Dead: []ranks.Rank{r}, D: ranks.Of(r), Detector: burst.sources[i]}
	}
	return msgs
}
