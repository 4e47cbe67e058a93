package verbs

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
)

// TestAgreeOverVerbs: 8 nodes over verbs run a loop of ERA agreements
// (OpOR of a value per rank and agreement); rank 0, the root of the
// agreement tree, is closed once a survivor has decided agreement 10.
// Every survivor decides every agreement, all decide the same value and
// dead set, every value holds every survivor's contribution and nothing
// nobody contributed, a dead set names only the closed rank, and the last
// one names it.
func TestAgreeOverVerbs(t *testing.T) {
	const n, count, killAt = 8, 30, 10
	const victim = ranks.Rank(0)
	ts := openAll(t, n, 101)
	nodes := startNodes(t, ts)
	contrib := func(r ranks.Rank, k int) []byte {
		return binary.LittleEndian.AppendUint64(nil, 1<<(uint(k)%8*8+uint(r)))
	}
	var (
		mu      sync.Mutex
		killed  bool
		decided = make([][]node.Agreement, n)
		errs    = make([]error, n)
		wg      sync.WaitGroup
	)
	t0 := time.Now()
	for i, nd := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := ranks.Rank(i)
			for k := 1; k <= count; k++ {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				a, err := nd.Agree(ctx, node.OpOR, contrib(r, k))
				cancel()
				if err != nil {
					errs[i] = fmt.Errorf("rank %d, agreement %d: %w", r, k, err)
					return
				}
				decided[i] = append(decided[i], a)
				mu.Lock()
				if r != victim && k == killAt && !killed {
					killed = true
					go nodes[victim].Close()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if !killed {
		t.Fatal("the victim was never closed")
	}
	var ref []node.Agreement
	for i := range nodes {
		r := ranks.Rank(i)
		if r == victim {
			continue
		}
		if errs[i] != nil {
			t.Fatalf("survivor: %v", errs[i])
		}
		if len(decided[i]) != count {
			t.Fatalf("rank %d decided %d of %d agreements", r, len(decided[i]), count)
		}
		if ref == nil {
			ref = decided[i]
		}
		for k, a := range decided[i] {
			b := ref[k]
			if a.ID != b.ID || !slices.Equal(a.Value, b.Value) || !slices.Equal(a.Dead, b.Dead) || a.Unacked != b.Unacked {
				t.Fatalf("agreement %d: rank %d decided %+v, another survivor %+v", k+1, r, a, b)
			}
		}
	}
	for k, a := range ref {
		var all uint64
		for r := range n {
			c := binary.LittleEndian.Uint64(contrib(ranks.Rank(r), k+1))
			all |= c
			if !slices.Contains(a.Dead, ranks.Rank(r)) && binary.LittleEndian.Uint64(a.Value)&c != c {
				t.Fatalf("agreement %d: value %x misses live rank %d's contribution", k+1, a.Value, r)
			}
		}
		if v := binary.LittleEndian.Uint64(a.Value); v&^all != 0 {
			t.Fatalf("agreement %d: value %x has bits nobody contributed", k+1, a.Value)
		}
		if len(a.Dead) > 1 || len(a.Dead) == 1 && a.Dead[0] != victim {
			t.Fatalf("agreement %d: dead set %v, want at most [%d]", k+1, a.Dead, victim)
		}
		if k < killAt && len(a.Dead) != 0 {
			t.Fatalf("agreement %d, before the kill: dead set %v", k+1, a.Dead)
		}
	}
	if last := ref[count-1]; !slices.Equal(last.Dead, []ranks.Rank{victim}) {
		t.Fatalf("last agreement's dead set %v, want [%d]", last.Dead, victim)
	}
	var writes uint64
	for i, tr := range ts {
		if ranks.Rank(i) != victim {
			writes += tr.VerbsStats().RCWrites
		}
	}
	if writes == 0 {
		t.Fatal("no heartbeat went over RDMA")
	}
	first := slices.IndexFunc(ref, func(a node.Agreement) bool { return len(a.Dead) > 0 })
	t.Logf("%d agreements in %v; the closed rank first in the dead set of agreement %d", count, time.Since(t0).Round(time.Millisecond), first+1)
}
