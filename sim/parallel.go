package sim

import (
	"sync"
	"sync/atomic"
)

// Parallel calls f(i) for i in [0, n) on up to workers goroutines. Runs are
// seeded by their index (RunSeed), so the results do not depend on workers.
func Parallel(n, workers int, f func(i int)) {
	workers = max(1, min(workers, n))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
			}
		}()
	}
	wg.Wait()
}
