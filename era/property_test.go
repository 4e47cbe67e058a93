package era

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/vigil-hpc/vigil/ranks"
)

// scenarioKinds are the failure patterns of TestProperties.
var scenarioKinds = []string{
	"none",      // failure-free
	"root",      // the root (label 0) fails
	"rootchild", // a child of the root fails
	"inner",     // an inner node (neither root nor leaf) fails
	"multi",     // several failures at random points
	"down",      // processes fail right after deciding, mid-DOWN
	"cascade",   // the root and its successors fail as each decides
	"node",      // all ranks of one node fail (hierarchical trees)
	"early",     // several failures before or while the agreement starts
	"long",      // 10 to 30 agreements in a row, failures all along
}

// genSchedule derives one schedule from (kind, seed).
func genSchedule(kind string, seed uint64) simConfig {
	rng := rand.New(rand.NewPCG(seed, uint64(len(kind))*0x51ed27))
	cfg := simConfig{
		name:         kind,
		n:            2 + rng.IntN(31),
		agreements:   1 + rng.IntN(4),
		sequential:   rng.IntN(2) == 0,
		dropInflight: rng.IntN(2) == 0,
		maxLatency:   1 + rng.IntN(20),
		maxDetect:    1 + rng.IntN(150),
		maxStartGap:  rng.IntN(30),
	}
	cfg.rebalance = cfg.sequential && rng.IntN(2) == 0
	if rng.IntN(3) == 0 {
		cfg.straggle = 2 + rng.IntN(30)
	}
	if kind == "long" {
		cfg.agreements = 10 + rng.IntN(21)
		cfg.sequential = rng.IntN(4) != 0
		cfg.rebalance = cfg.sequential && rng.IntN(2) == 0
	}
	if rng.IntN(10) == 0 {
		cfg.n = 34 + rng.IntN(47)
	}
	shapes := []Shape{BinaryShape, BinaryShape, StarShape, StringShape, KAryShape(3), KAryShape(4)}
	hier := kind == "node" || rng.IntN(5) == 0
	if hier {
		cfg.n = 4 + rng.IntN(37)
		ppn := 2 + rng.IntN(5)
		nodes := (cfg.n + ppn - 1) / ppn
		nodeOf := make([]int, cfg.n)
		blocked := rng.IntN(2) == 0
		for r := range nodeOf {
			if blocked {
				nodeOf[r] = r / ppn
			} else {
				nodeOf[r] = r % nodes
			}
		}
		y := BinaryShape
		if rng.IntN(2) == 0 {
			y = StarShape
		}
		cfg.base = NewHierarchical(BinaryShape, y, nodeOf, All(cfg.n))
		if kind == "node" {
			nd := rng.IntN(nodes)
			t0 := rng.IntN(cfg.n*4 + 40)
			var vs []victim
			for r := range cfg.n {
				if nodeOf[r] == nd {
					vs = append(vs, victim{r: ranks.Rank(r), at: t0 + rng.IntN(6), onDecide: -1, onStep: -1})
				}
			}
			if len(vs) == cfg.n { // keep a survivor
				vs = vs[1:]
			}
			cfg.victims = vs
			return cfg
		}
	} else {
		cfg.base = NewFlat(shapes[rng.IntN(len(shapes))], All(cfg.n))
	}
	est := cfg.n*4*cfg.agreements + 40
	trigger := func(r ranks.Rank) victim {
		v := victim{r: r, at: -1, onDecide: -1, onStep: -1}
		switch rng.IntN(3) {
		case 0:
			v.at = rng.IntN(est)
		case 1:
			v.onStep = 1 + rng.IntN(6)
		default:
			v.onDecide = rng.IntN(cfg.agreements)
		}
		return v
	}
	t := cfg.base
	root := t.Root()
	pick := func(rs []ranks.Rank) ranks.Rank { return rs[rng.IntN(len(rs))] }
	switch kind {
	case "root":
		cfg.victims = []victim{trigger(root)}
	case "rootchild":
		cfg.victims = []victim{trigger(pick(t.Children(root, nil)))}
	case "inner":
		var inner []ranks.Rank
		for r := range cfg.n {
			if rr := ranks.Rank(r); rr != root && len(t.Children(rr, nil)) > 0 {
				inner = append(inner, rr)
			}
		}
		if len(inner) == 0 {
			inner = t.Children(root, nil)
		}
		cfg.victims = []victim{trigger(pick(inner))}
	case "multi":
		k := 1 + rng.IntN(cfg.n-1)
		for _, r := range rng.Perm(cfg.n)[:k] {
			cfg.victims = append(cfg.victims, trigger(ranks.Rank(r)))
		}
	case "long":
		k := rng.IntN(cfg.n)
		for _, r := range rng.Perm(cfg.n)[:k] {
			v := trigger(ranks.Rank(r))
			if v.at >= 0 {
				v.at = rng.IntN(est)
			}
			cfg.victims = append(cfg.victims, v)
		}
	case "early":
		k := 1 + rng.IntN(max(cfg.n/3, 1))
		for _, r := range rng.Perm(cfg.n)[:k] {
			cfg.victims = append(cfg.victims, victim{r: ranks.Rank(r), at: rng.IntN(cfg.maxStartGap + 2), onDecide: -1, onStep: -1})
		}
	case "down":
		k := 1 + rng.IntN(min(3, cfg.n-1))
		perm := rng.Perm(cfg.n)
		if rng.IntN(2) == 0 {
			perm = append([]int{int(root)}, perm...)
		}
		seen := map[int]bool{}
		for _, r := range perm {
			if len(seen) == k {
				break
			}
			if !seen[r] {
				seen[r] = true
				cfg.victims = append(cfg.victims, victim{r: ranks.Rank(r), at: -1, onStep: -1, onDecide: rng.IntN(cfg.agreements)})
			}
		}
	case "cascade":
		// The successive roots (lowest labels) die as each decides.
		k := 1 + rng.IntN(min(4, cfg.n-1))
		for l := range k {
			cfg.victims = append(cfg.victims, victim{r: t.rank(l), at: -1, onStep: -1, onDecide: rng.IntN(cfg.agreements)})
		}
	}
	return cfg
}

// schedules returns how many schedules of each kind to run: a quick count
// by default, more without -short under VIGIL_ERA_SOAK=<count>.
func schedules(t *testing.T) int {
	if v := os.Getenv("VIGIL_ERA_SOAK"); v != "" && !testing.Short() {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 {
			t.Fatalf("VIGIL_ERA_SOAK=%q: want a positive count", v)
		}
		return k
	}
	if testing.Short() {
		return 100
	}
	return 700
}

// TestProperties checks termination, irrevocability, agreement and
// participation (with the exact dead set and flag) over seeded schedules.
func TestProperties(t *testing.T) {
	count := schedules(t)
	for _, kind := range scenarioKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			var events, nonUniform, crashes, maxRec int
			var totalN, agreements int
			n := count
			if kind == "long" { // ten times the agreements of the others
				n = max(count/5, 1)
			}
			for i := range n {
				seed := uint64(i)
				cfg := genSchedule(kind, seed)
				s := newSim(t, cfg, seed)
				s.run()
				s.check()
				events += s.events
				if s.nonUniform > 0 {
					nonUniform++
				}
				totalN += cfg.n
				agreements += cfg.agreements
				maxRec = max(maxRec, s.maxRecords)
				for _, d := range s.died {
					if d >= 0 {
						crashes++
					}
				}
			}
			t.Logf("%s: %d schedules (mean n %.1f), %d agreements, %d events, %d crashes; %d schedules where a process decided and died with a decision the survivors did not take; max records per core %d",
				kind, n, float64(totalN)/float64(n), agreements, events, crashes, nonUniform, maxRec)
		})
	}
}

// TestScheduleRepro reruns one schedule: VIGIL_ERA_REPRO=kind:seed.
func TestScheduleRepro(t *testing.T) {
	v := os.Getenv("VIGIL_ERA_REPRO")
	if v == "" {
		t.Skip("set VIGIL_ERA_REPRO=kind:seed")
	}
	var kind string
	var seed uint64
	for i := range v {
		if v[i] == ':' {
			kind = v[:i]
			s, err := strconv.ParseUint(v[i+1:], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			seed = s
		}
	}
	cfg := genSchedule(kind, seed)
	t.Logf("%s", fmt.Sprintf("%+v", cfg))
	s := newSim(t, cfg, seed)
	s.run()
	s.check()
}
