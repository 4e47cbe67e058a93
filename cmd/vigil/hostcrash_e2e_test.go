package main

import (
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/bootstrap"
	"github.com/vigil-hpc/vigil/node"
)

// TestE2EHostCrash kills blocks of consecutive ranks at once, as a host
// crash does (ranks r … r+k−1 share a host): every survivor must report
// every rank of the blocks, and nobody else. The time from the kill until
// the last survivor knew is logged against 2δ + 50 ms (block mending; the
// benchmark of the distribution is `vigil-bench hostcrash`).
func TestE2EHostCrash(t *testing.T) {
	const n = 16
	blocks := []struct {
		name string
		dead []uint32
	}{
		{"one host of 8", []uint32{4, 5, 6, 7, 8, 9, 10, 11}},
		{"a block of 2", []uint32{4, 5}},
		{"all but one", []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
		{"two hosts of 3", []uint32{2, 3, 4, 10, 11, 12}},
	}
	for _, b := range blocks {
		t.Run(b.name, func(t *testing.T) {
			j := startJob(t, n, "-h", "10ms", "-delta", "50ms")
			time.Sleep(2500 * time.Millisecond) // past the start-up grace
			gone := map[uint32]bool{}
			killed := node.Mono()
			for _, r := range b.dead {
				j.kill(r)
				gone[r] = true
			}
			j.waitComplete(n, gone, 30*time.Second)
			time.Sleep(300 * time.Millisecond)
			j.checkAccuracy(gone)
			var last int64
			for _, by := range j.deadReports() {
				for _, l := range by {
					last = max(last, l.DeliveredMono)
				}
			}
			t.Logf("%s: every survivor knew all %d after %.0f ms (2δ + 50 ms = 150 ms)", b.name, len(b.dead), float64(last-killed)/1e6)
		})
	}
}

// TestE2EHostCrashPretendedHosts kills one whole pretended host of 8
// ranks (VIGIL_RANKS_PER_HOST=8, as `vigil run -ranks-per-host 8` sets)
// with a mending window of 2 < 8: with the host labels the host is one
// probe round, without them R = 3 rounds. Every survivor must report every
// rank of the host and nobody else; the times are logged against 2δ +
// 50 ms.
func TestE2EHostCrashPretendedHosts(t *testing.T) {
	const n = 16
	dead := []uint32{8, 9, 10, 11, 12, 13, 14, 15}
	for _, labelled := range []bool{true, false} {
		name := "host labels"
		if !labelled {
			name = "no labels"
		}
		t.Run(name, func(t *testing.T) {
			if labelled {
				t.Setenv(bootstrap.EnvRanksPerHost, "8")
			}
			j := startJob(t, n, "-h", "10ms", "-delta", "50ms", "-mend-probe", "2")
			time.Sleep(2500 * time.Millisecond) // past the start-up grace
			gone := map[uint32]bool{}
			killed := node.Mono()
			for _, r := range dead {
				j.kill(r)
				gone[r] = true
			}
			j.waitComplete(n, gone, 30*time.Second)
			time.Sleep(300 * time.Millisecond)
			j.checkAccuracy(gone)
			var last int64
			for _, by := range j.deadReports() {
				for _, l := range by {
					last = max(last, l.DeliveredMono)
				}
			}
			t.Logf("%s, W = 2: every survivor knew the host of 8 after %.0f ms (2δ + 50 ms = 150 ms)", name, float64(last-killed)/1e6)
		})
	}
}
