package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/bootstrap/local"
)

// System is a failure detector under comparison.
type System string

// The systems of the head-to-head.
const (
	Vigil      System = "vigil"
	Memberlist System = "memberlist"
	// VigilLate is Vigil whose block mending probes a dead emitter's
	// predecessors only at its suspicion (-mend-early < 0), not once it
	// has been silent for δ/2: the comparison for the early probes.
	VigilLate System = "vigil-late"
)

// H2HConfig configures the head-to-head.
type H2HConfig struct {
	// BenchBin runs the children: `BenchBin child vigil|memberlist`
	// (the bench module's vigil-bench command).
	BenchBin string
	Sizes    []int
	// Period is Vigil's h and memberlist's ProbeInterval; Vigil's δ is
	// DeltaFactor·Period (default 5, Vigil's default).
	Period      time.Duration
	DeltaFactor int
	// Window is how long traffic is counted before the kills.
	Window time.Duration
	// Several is how many ranks the second kill takes at once.
	Several int
	// Systems are the systems run at each size, in order (default Vigil,
	// Memberlist).
	Systems []System
	// BurnFor is how long the false-suspicion run keeps every CPU busy.
	BurnFor time.Duration
	// Wait bounds how long survivors may take to learn of a kill.
	Wait time.Duration
	Log  io.Writer
}

// H2HRow is the result of one system at one size.
type H2HRow struct {
	System System
	N      int
	Period time.Duration
	// MsgsPerPeriod and BytesPerPeriod are summed over all members.
	MsgsPerPeriod, BytesPerPeriod float64
	// One is the kill of one rank; Spread of Several ranks at once, no two
	// of them neighbours; Adjacent of Several neighbouring ranks at once
	// (the observation ring's worst case).
	One, Spread, Adjacent Kill
	// FalseSuspicions counts "dead" reports during the burner run, where
	// nobody died; Refuted counts members memberlist declared dead that
	// came back.
	FalseSuspicions, Refuted int
}

// children is a running group of head-to-head child processes.
type children struct {
	sys   System
	cmds  []*exec.Cmd
	lines chan ChildLine
	wg    sync.WaitGroup
	srv   *local.Server
}

func (c *children) start(bin string, env []string, args ...string) (*exec.Cmd, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c.cmds = append(c.cmds, cmd)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var l ChildLine
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Ev != "" {
				c.lines <- l
			}
		}
		cmd.Wait()
	}()
	return cmd, nil
}

func startChildren(cfg H2HConfig, sys System, n int) (*children, error) {
	c := &children{sys: sys, lines: make(chan ChildLine, 256*n)}
	switch sys {
	case Vigil, VigilLate:
		srv, err := local.NewServer(n)
		if err != nil {
			return nil, err
		}
		c.srv = srv
		delta := time.Duration(max(cfg.DeltaFactor, 2)) * cfg.Period
		args := []string{"child", "vigil", "-h", cfg.Period.String(), "-delta", delta.String()}
		if sys == VigilLate {
			args = append(args, "-mend-early", "-1ns")
		}
		for r := range n {
			if _, err := c.start(cfg.BenchBin, append(environ(), srv.Identity(uint32(r)).Env()...), args...); err != nil {
				c.stop()
				return nil, err
			}
		}
	case Memberlist:
		seed := ""
		for r := range n {
			args := []string{"child", "memberlist", "-rank", strconv.Itoa(r), "-n", strconv.Itoa(n),
				"-period", cfg.Period.String(), "-seed", seed}
			if _, err := c.start(cfg.BenchBin, environ(), args...); err != nil {
				c.stop()
				return nil, err
			}
			if r == 0 {
				l, err := c.await(func(l ChildLine) bool { return l.Ev == "listen" }, 30*time.Second)
				if err != nil {
					c.stop()
					return nil, err
				}
				seed = l.Addr
			}
		}
	default:
		return nil, fmt.Errorf("bench: unknown system %q", sys)
	}
	return c, nil
}

// await returns the first line matching f (other lines are dropped).
func (c *children) await(f func(ChildLine) bool, d time.Duration) (ChildLine, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case l := <-c.lines:
			if f(l) {
				return l, nil
			}
		case <-t.C:
			return ChildLine{}, fmt.Errorf("bench: %s children: nothing expected within %v", c.sys, d)
		}
	}
}

// collect reads lines for d, keeping the latest stats per rank and every
// other line.
func (c *children) collect(d time.Duration, stats map[int]ChildLine, other *[]ChildLine, until func() bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case l := <-c.lines:
			if l.Ev == "stats" {
				stats[l.Rank] = l
			} else {
				*other = append(*other, l)
			}
			if until != nil && until() {
				return
			}
		case <-t.C:
			return
		}
	}
}

func (c *children) stop() {
	for _, cmd := range c.cmds {
		cmd.Process.Signal(syscall.SIGTERM)
	}
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	go func() {
		for range c.lines { // keep the readers from blocking until they end
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		for _, cmd := range c.cmds {
			cmd.Process.Kill()
		}
		<-done
	}
	close(c.lines) // every reader has returned: ends the drain above
	if c.srv != nil {
		c.srv.Close()
	}
}

// HeadToHead runs both systems at every size.
func HeadToHead(ctx context.Context, cfg H2HConfig) ([]H2HRow, error) {
	var rows []H2HRow
	systems := cfg.Systems
	if len(systems) == 0 {
		systems = []System{Vigil, Memberlist}
	}
	for _, n := range cfg.Sizes {
		for _, sys := range systems {
			if err := ctx.Err(); err != nil {
				return rows, err
			}
			row, err := h2hKills(cfg, sys, n)
			if err != nil {
				return rows, fmt.Errorf("%s N=%d: %w", sys, n, err)
			}
			if cfg.BurnFor > 0 {
				if row.FalseSuspicions, row.Refuted, err = h2hBurn(cfg, sys, n); err != nil {
					return rows, fmt.Errorf("%s N=%d burners: %w", sys, n, err)
				}
			}
			if cfg.Log != nil {
				fmt.Fprintf(cfg.Log, "h2h %-10s N=%-3d one: first %v stable %v | spread: %v %v | adjacent: %v %v | %.1f msgs %.0f B per period | false %d\n",
					sys, n, row.One.First, row.One.Stable, row.Spread.First, row.Spread.Stable, row.Adjacent.First, row.Adjacent.Stable,
					row.MsgsPerPeriod, row.BytesPerPeriod, row.FalseSuspicions)
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

func waitReady(c *children, n int) error { return waitReadyFor(c, n, 60*time.Second) }

// waitReadyFor is waitReady with a time limit of d.
func waitReadyFor(c *children, n int, d time.Duration) error {
	ready := map[int]bool{}
	_, err := c.await(func(l ChildLine) bool {
		if l.Ev == "ready" {
			ready[l.Rank] = true
		}
		return len(ready) == n
	}, d)
	if err != nil {
		return fmt.Errorf("%w (%d of %d members ready)", err, len(ready), n)
	}
	return nil
}

// Kill is the outcome of one kill -9 of one or more ranks at once.
type Kill struct {
	Victims []int
	// First is when the first survivor reported a victim, Stable when the
	// last survivor learned of the last victim; Complete is false when
	// some survivor had not reported every victim within H2HConfig.Wait.
	First, Stable time.Duration
	Complete      bool
	// Latencies are every (survivor, victim) report's delay.
	Latencies []time.Duration
	// Missing lists the (survivor, victim) reports that never came.
	Missing [][2]int
}

// h2hKills runs one system at size n twice: (a) traffic, then a kill of
// one rank, then of Several ranks spread over the ring (no two adjacent
// among the survivors); (b) after the same settling time, a kill of Several
// adjacent ranks (1, 2, …). Both kills come in the steady state, past
// Vigil's start-up grace.
func h2hKills(cfg H2HConfig, sys System, n int) (H2HRow, error) {
	row := H2HRow{System: sys, N: n, Period: cfg.Period}
	err := h2hRun(cfg, sys, n, func(c *children, stats map[int]ChildLine, kill func([]int) Kill) {
		var other []ChildLine
		c.collect(time.Second, stats, &other, nil) // settle
		before := maps2(stats)
		c.collect(cfg.Window, stats, &other, nil)
		row.MsgsPerPeriod, row.BytesPerPeriod = trafficPerPeriod(before, stats, cfg.Period)
		row.One = kill([]int{n / 2})
		var survivors []int
		for r := range n {
			if r != n/2 {
				survivors = append(survivors, r)
			}
		}
		var spread []int
		for i := 1; i < len(survivors) && len(spread) < cfg.Several; i += 2 {
			spread = append(spread, survivors[i])
		}
		row.Spread = kill(spread)
	})
	if err != nil {
		return row, err
	}
	err = h2hRun(cfg, sys, n, func(c *children, stats map[int]ChildLine, kill func([]int) Kill) {
		var other []ChildLine
		c.collect(time.Second+cfg.Window, stats, &other, nil) // settle, as in (a)
		var adj []int
		for v := 1; v < n-1 && len(adj) < cfg.Several; v++ {
			adj = append(adj, v)
		}
		row.Adjacent = kill(adj)
	})
	return row, err
}

// h2hRun starts n children of sys, waits until they are ready and runs
// body with a kill function, which kills at a random phase of the period;
// it stops the children afterwards.
func h2hRun(cfg H2HConfig, sys System, n int, body func(c *children, stats map[int]ChildLine, kill func([]int) Kill)) error {
	c, err := startChildren(cfg, sys, n)
	if err != nil {
		return err
	}
	defer c.stop()
	if err := waitReady(c, n); err != nil {
		return err
	}
	stats := map[int]ChildLine{}
	alive := make([]bool, n)
	for i := range alive {
		alive[i] = true
	}
	kill := func(victims []int) Kill {
		k := Kill{Victims: victims}
		// A crash comes at any time. Without this wait the kill would fall
		// at the same phase of Vigil's heartbeat schedule every run: its
		// heartbeat threads start together, just before the children print
		// "ready", and the waits since are whole periods. Memberlist
		// staggers its probe ticker at random by itself.
		if cfg.Period > 0 {
			time.Sleep(rand.N(cfg.Period))
		}
		t0 := MonoNow()
		for _, v := range victims {
			c.cmds[v].Process.Signal(syscall.SIGKILL)
			alive[v] = false
		}
		want := map[[2]int]bool{}
		for r := range n {
			if alive[r] {
				for _, v := range victims {
					want[[2]int{r, v}] = true
				}
			}
		}
		var got []ChildLine
		c.collect(cfg.Wait, stats, &got, func() bool {
			if len(got) > 0 {
				if l := got[len(got)-1]; l.Ev == "dead" {
					delete(want, [2]int{l.Rank, l.Dead})
				}
			}
			return len(want) == 0
		})
		for _, l := range got {
			if l.Ev == "dead" && slices.Contains(victims, l.Dead) && alive[l.Rank] {
				d := time.Duration(l.Mono - t0)
				k.Latencies = append(k.Latencies, d)
				if k.First == 0 || d < k.First {
					k.First = d
				}
				k.Stable = max(k.Stable, d)
			}
		}
		k.Complete = len(want) == 0
		for sv := range want {
			k.Missing = append(k.Missing, sv)
		}
		slices.SortFunc(k.Missing, func(a, b [2]int) int { return (a[0]-b[0])*n + a[1] - b[1] })
		return k
	}
	body(c, stats, kill)
	return nil
}

func maps2(m map[int]ChildLine) map[int]ChildLine {
	c := make(map[int]ChildLine, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// trafficPerPeriod sums every member's counters over the window between
// two snapshots and scales them to one period.
func trafficPerPeriod(before, after map[int]ChildLine, period time.Duration) (msgs, bytes float64) {
	for r, a := range after {
		b, ok := before[r]
		if !ok || a.Mono <= b.Mono {
			continue
		}
		periods := float64(a.Mono-b.Mono) / float64(period)
		msgs += float64(a.Msgs-b.Msgs) / periods
		bytes += float64(a.Bytes-b.Bytes) / periods
	}
	return msgs, bytes
}

func h2hBurn(cfg H2HConfig, sys System, n int) (falseSusp, refuted int, err error) {
	c, err := startChildren(cfg, sys, n)
	if err != nil {
		return 0, 0, err
	}
	defer c.stop()
	if err := waitReady(c, n); err != nil {
		return 0, 0, err
	}
	b, err := StartBurners(0)
	if err != nil {
		return 0, 0, err
	}
	stats := map[int]ChildLine{}
	var other []ChildLine
	c.collect(cfg.BurnFor, stats, &other, nil)
	b.Stop()
	for _, l := range other {
		switch l.Ev {
		case "dead":
			falseSusp++
		case "alive":
			refuted++
		}
	}
	return falseSusp, refuted, nil
}
