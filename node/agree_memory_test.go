package node_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport/mem"
)

// TestAgreeBoundedMemory runs 100,000 agreements through the runtime (4
// nodes, in-memory transport) and checks that the retained agreement state
// stays bounded: the garbage collection of seed 001's Section 4 drops every
// decided result once a later agreement's collection bound covers it.
func TestAgreeBoundedMemory(t *testing.T) {
	const n = 4
	count := 100_000
	if testing.Short() || raceEnabled {
		count = 20_000
	}
	const maxRecords = 8 // per node, over all operations
	c := startCluster(t, n, quietCfg, mem.WithQueueLen(1024))
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	var base uint64
	var peakRecords int
	var wg sync.WaitGroup
	errs := make(chan error, n)
	t0 := time.Now()
	for i, nd := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 1; k <= count; k++ {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				_, err := nd.Agree(ctx, node.OpOR, contrib(ranks.Rank(i), uint64(k)))
				cancel()
				if err != nil {
					errs <- err
					return
				}
				if i != 0 || k%5000 != 0 {
					continue
				}
				st, err := nd.AgreeStats()
				if err != nil {
					errs <- err
					return
				}
				peakRecords = max(peakRecords, st.Records)
				if st.Records > maxRecords || st.Waiting != 0 {
					t.Errorf("after %d agreements rank 0 holds %+v", k, st)
				}
				if k == 10_000 {
					base = heap()
				} else if k > 10_000 {
					if h := heap(); h > base+8<<20 {
						t.Errorf("after %d agreements the heap is %d KiB, %d KiB after 10,000", k, h>>10, base>>10)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	el := time.Since(t0)
	for i, nd := range c.nodes {
		st, err := nd.AgreeStats()
		if err != nil {
			t.Fatal(err)
		}
		if st.Records > maxRecords || st.Open != 0 || st.Decided != uint64(count) {
			t.Fatalf("rank %d at the end: %+v", i, st)
		}
	}
	t.Logf("%d agreements on %d nodes in %v (%.1f µs each); at most %d records held by rank 0; heap %d KiB after 10,000 and %d KiB at the end",
		count, n, el.Round(time.Millisecond), float64(el.Microseconds())/float64(count), peakRecords, base>>10, heap()>>10)
}
