package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/bootstrap"
	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/launch"
	"github.com/vigil-hpc/vigil/node"
)

// scenario is a set of SIGKILLs, each at an offset from the scenario start.
type scenario struct {
	name  string
	kills []kill
}

// block reports whether the kills are one block at once (a host crash):
// ranks consecutive on the ring of the ranks not killed before, which block
// mending bounds like one failure.
func (sc scenario) block(killed map[uint32]bool) bool {
	if len(sc.kills) < 2 {
		return false
	}
	for i, k := range sc.kills {
		if k.after != 0 {
			return false
		}
		if i == 0 {
			continue
		}
		prev := k.rank - 1
		for prev > sc.kills[i-1].rank && killed[prev] {
			prev--
		}
		if prev != sc.kills[i-1].rank {
			return false
		}
	}
	return true
}

type kill struct {
	rank  uint32
	after time.Duration
}

// demoOptions are vigil demo's flags.
type demoOptions struct {
	n, perHost int
	settle     time.Duration
	df         detectorFlags
}

// demoFlags defines vigil demo's flags from the settings table.
func demoFlags() (*flag.FlagSet, *demoOptions) {
	o := new(demoOptions)
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	settingVar(fs, "n", &o.n)
	settingVar(fs, "settle", &o.settle)
	settingVar(fs, "ranks-per-host", &o.perHost)
	o.df.register(fs)
	return fs, o
}

func demoMain(args []string) error {
	fs, o := demoFlags()
	n, settle, perHost, df := &o.n, &o.settle, &o.perHost, &o.df
	if err := fs.Parse(args); err != nil {
		return asUsage(err)
	}
	if *n < 14 || *n > maxLocalRanks {
		return usageErrorf("-n %d: the demo needs 14 to %d ranks", *n, maxLocalRanks)
	}
	if *perHost < 0 || *perHost > *n/2 {
		return usageErrorf("-ranks-per-host %d: want 0 (no hosts) to %d (at least two hosts of -n %d)", *perHost, *n/2, *n)
	}
	// The scenarios take 9 ranks of 16 without an agreement between them:
	// by default the survivors would then stop as a minority
	// (docs/partitions.md). The demo is about detection: its agents go on,
	// unless -partition is given.
	partitionSet := false
	fs.Visit(func(f *flag.Flag) { partitionSet = partitionSet || f.Name == "partition" })
	if !partitionSet {
		df.partition = detector.PartitionContinue
	}
	if err := df.validate(*n); err != nil {
		return err
	}
	if *settle < 0 {
		return usageErrorf("-settle %v: want ≥ 0", *settle)
	}
	cfg := df.config()
	cfg.Size = *n
	check := cfg.CheckPeriod
	if check == 0 {
		check = min(df.delta/10, df.h)
	}
	// t, the paper's bound on one message's transfer time: seed 000 assumes
	// h ≥ 3t; a heartbeat is also seen up to one check period late.
	t := df.h/3 + check

	N := uint32(*n)
	// The fourth scenario: host 0 (ranks 0 … k−1, those the scenarios
	// before left alive) with pretended hosts of k ranks, which the agents
	// know as host labels; without hosts, ranks 0–3.
	first := []uint32{5, 9, 10, N - 3, N - 2} // killed by the scenarios before
	host := scenario{name: "four consecutive ranks at once, 0–3 (no host labels)"}
	size := 4
	if *perHost > 0 {
		size = *perHost
		host.name = fmt.Sprintf("a whole host at once: host 0, ranks 0–%d (pretended hosts of %d ranks, labelled)", size-1, size)
	}
	for r := uint32(0); r < uint32(size); r++ {
		if !slices.Contains(first, r) {
			host.kills = append(host.kills, kill{r, 0})
		}
	}
	if len(host.kills) < size {
		host.name += ", those still alive"
	}
	scenarios := []scenario{
		{"one rank alone", []kill{{5, 0}}},
		{"two consecutive ranks on the ring, at once", []kill{{9, 0}, {10, 0}}},
		{"an observer together with its emitter, while it is detecting it", []kill{{N - 3, 0}, {N - 2, df.delta}}},
		host,
	}
	var opts launch.Options
	if *perHost > 0 {
		opts.ExtraEnv = []string{bootstrap.EnvRanksPerHost + "=" + strconv.Itoa(*perHost)}
	}

	self, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Printf("Vigil demo: %d ranks over %s on this machine, h=%v δ=%v, check every %v, broadcast %s, -partition %v\n",
		*n, df.transport, df.h, df.delta, check, df.broadcast, df.partition)
	fmt.Printf("Bound: T(f) = f(f+1)δ + f·t + f(f+1)/2·8t·log2(n) (seed 000, Theorem 1) with t = h/3 + check = %v\n", t)
	if df.mendProbe > 0 {
		fmt.Printf("       a block of b at once: T_block(b) = (R+1)δ + t + B(n), R probe rounds of block mending (window %d)\n", df.mendProbe)
	}
	if *perHost > 0 {
		fmt.Printf("Hosts: pretended, %d ranks per host (rank r on host r/%d), known to every rank as host labels\n", *perHost, *perHost)
		if df.mendProbe > 0 {
			fmt.Printf("       a block touching j hosts: T_host(b) = (min(j, R)+1)δ + t + B(n)\n")
		}
	}
	fmt.Println()
	start := node.Mono()
	job, err := launch.Start(*n, append([]string{self, "agent"}, df.args()...), opts)
	if err != nil {
		return err
	}
	defer job.Stop(3 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	early, err := job.WaitReady(ctx)
	cancel()
	if err != nil {
		return err
	}
	stamp := func(mono int64) string { return fmt.Sprintf("[%8.3fs]", float64(mono-start)/1e9) }
	fmt.Printf("%s all %d ranks ready; letting the ring settle for %v\n", stamp(node.Mono()), *n, *settle)

	killed := map[uint32]bool{}
	failures := []string{}
	falseSuspicion := func(l launch.Line) {
		if l.Ev == "dead" && !killed[l.Dead] {
			failures = append(failures, fmt.Sprintf("rank %d reported live rank %d dead (detector %d)", l.Rank, l.Dead, l.Detector))
		}
	}
	for _, l := range early {
		falseSuspicion(l)
	}
	// Drain lines while the ring settles.
	settleEnd := time.After(*settle)
drain:
	for {
		select {
		case l := <-job.Lines:
			falseSuspicion(l)
		case <-settleEnd:
			break drain
		}
	}

	for i, sc := range scenarios {
		alive := 0
		for r := uint32(0); r < N; r++ {
			if !killed[r] {
				alive++
			}
		}
		f := len(sc.kills)
		bound, name := time.Duration(hb.Bound(f, alive, int64(df.delta), int64(t))), fmt.Sprintf("T(%d)", f)
		if sc.block(killed) && df.mendProbe > 0 {
			// Block mending (hb/mend.go): a block within the window is
			// bounded like one failure; with host labels a round also
			// takes in the rest of its host, so a whole host is one round.
			bound, name = time.Duration(hb.BlockBound(f, df.mendProbe, alive, int64(df.delta), int64(t))), fmt.Sprintf("T_block(%d)", f)
			if *perHost > 0 {
				hosts := map[uint32]bool{}
				for _, k := range sc.kills {
					hosts[k.rank/uint32(*perHost)] = true
				}
				hbound := time.Duration(hb.HostBlockBound(f, len(hosts), df.mendProbe, alive, int64(df.delta), int64(t)))
				if hbound <= bound {
					bound, name = hbound, fmt.Sprintf("T_host(%d, %d host)", f, len(hosts))
					if len(hosts) > 1 {
						name += "s"
					}
				}
			}
		}
		fmt.Printf("\nScenario %d: %s (f = %d, n = %d, %s = %v)\n", i+1, sc.name, f, alive, name, bound.Round(time.Millisecond))

		t0 := node.Mono()
		// The scenario's timeline, printed in time order at its end: the
		// agents' lines arrive later than the times they carry.
		type entry struct {
			at   int64
			text string
		}
		var timeline []entry
		note := func(at int64, format string, args ...any) {
			timeline = append(timeline, entry{at, fmt.Sprintf("%s %+9.1f ms  ", stamp(at), ms(at-t0)) + fmt.Sprintf(format, args...)})
		}
		killAt := map[uint32]int64{}
		pending := append([]kill(nil), sc.kills...)
		sort.Slice(pending, func(a, b int) bool { return pending[a].after < pending[b].after })
		detected := map[uint32]launch.Line{}
		learned := map[uint32]map[uint32]int64{} // dead -> survivor -> mono
		for _, k := range sc.kills {
			learned[k.rank] = map[uint32]int64{}
		}
		done := func() bool {
			if len(pending) > 0 {
				return false
			}
			for _, k := range sc.kills {
				for r := uint32(0); r < N; r++ {
					if killed[r] {
						continue
					}
					if _, ok := learned[k.rank][r]; !ok {
						return false
					}
				}
			}
			return true
		}
		timeout := time.After(bound + 10*time.Second)
		tick := time.NewTicker(time.Millisecond)
	wait:
		for !done() {
			select {
			case <-tick.C:
				for len(pending) > 0 && node.Mono()-t0 >= int64(pending[0].after) {
					k := pending[0]
					pending = pending[1:]
					killed[k.rank] = true
					killAt[k.rank] = node.Mono()
					job.Signal(k.rank, syscall.SIGKILL)
					note(killAt[k.rank], "SIGKILL rank %d", k.rank)
				}
			case l, ok := <-job.Lines:
				if !ok {
					failures = append(failures, "agents' output ended")
					break wait
				}
				falseSuspicion(l)
				if l.Ev != "dead" || learned[l.Dead] == nil || killed[l.Rank] {
					continue
				}
				learned[l.Dead][l.Rank] = l.DeliveredMono
				if l.Rank == l.Detector {
					detected[l.Dead] = l
					note(l.DeliveredMono, "rank %d detects rank %d dead (%.1f ms after its kill)",
						l.Rank, l.Dead, ms(l.DeliveredMono-killAt[l.Dead]))
				}
			case <-timeout:
				failures = append(failures, fmt.Sprintf("scenario %d: not every survivor learned every failure within %v", i+1, bound+10*time.Second))
				break wait
			}
		}
		tick.Stop()
		var last int64
		type summary struct {
			at         int64
			dead, rank uint32
			count      int
		}
		var sums []summary
		for _, k := range sc.kills {
			s := summary{dead: k.rank}
			for r, at := range learned[k.rank] {
				if killed[r] { // learned it, then was killed too
					continue
				}
				s.count++
				if at > s.at {
					s.at, s.rank = at, r
				}
			}
			if s.at > 0 {
				sums = append(sums, s)
				last = max(last, s.at)
			}
		}
		for _, s := range sums {
			note(s.at, "last survivor to learn rank %d: rank %d (%d of %d survivors know)", s.dead, s.rank, s.count, alive-f)
		}
		sort.SliceStable(timeline, func(a, b int) bool { return timeline[a].at < timeline[b].at })
		for _, e := range timeline {
			fmt.Println(e.text)
		}
		firstKill := t0
		for _, at := range killAt {
			firstKill = min(firstKill, at)
		}
		if last > 0 {
			took := time.Duration(last - firstKill)
			verdict := "within the bound"
			if took > bound {
				verdict = "EXCEEDS THE BOUND"
				failures = append(failures, fmt.Sprintf("scenario %d took %v > %s = %v", i+1, took, name, bound))
			}
			fmt.Printf("  stabilised %.1f ms after the first kill; %s = %.1f ms: %s\n", ms(int64(took)), name, ms(int64(bound)), verdict)
		}
		// Let stragglers (duplicate knowledge, late lines) arrive.
		calm := time.After(200 * time.Millisecond)
	calmLoop:
		for {
			select {
			case l := <-job.Lines:
				falseSuspicion(l)
			case <-calm:
				break calmLoop
			}
		}
	}

	fmt.Println()
	if len(failures) > 0 {
		fmt.Println("FAIL:")
		fmt.Println("  " + strings.Join(failures, "\n  "))
		return fmt.Errorf("demo failed")
	}
	fmt.Printf("OK: every survivor learned every failure, no live rank was suspected, every scenario within its bound.\n")
	return nil
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }
