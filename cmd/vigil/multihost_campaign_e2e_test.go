package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/lab/mpitest"
	"github.com/vigil-hpc/vigil/launch"
	"github.com/vigil-hpc/vigil/node"
)

// The kinds of fault of TestMultiHostCampaign.
const (
	ckKill      = "kill-9"      // SIGKILL of a live rank: reported
	ckBlockKill = "block-kill"  // SIGKILL of 2–4 ring-consecutive live ranks at once: all reported
	ckStopShort = "stop<δ-h"    // SIGSTOP shorter than δ − h, then SIGCONT: not reported
	ckStopLong  = "stop>δ"      // SIGSTOP until reported (longer than δ), then SIGCONT: reported, evicted
	ckDelay     = "delay<δ-h"   // a host's link delayed below δ − h for seconds: not reported
	ckLoss      = "loss"        // frames of a host's link lost at 10–30 % for seconds: not reported
	ckPartition = "partition"   // a host's link down longer than δ, then up: its ranks reported, stopped as a minority during the cut
	ckHostKill  = "host-killed" // a host cut off and every process in it killed: its ranks reported
)

var campaignKinds = []string{ckKill, ckBlockKill, ckStopShort, ckStopLong, ckDelay, ckLoss, ckPartition, ckHostKill}

// Bounds of the campaign's waits.
const (
	campaignReportWait = 30 * time.Second // for every survivor to report a fault
	campaignEvictWait  = 30 * time.Second // for a rank declared dead and resumed to be evicted
)

// TestMultiHostCampaign is a randomized fault campaign (issue #17) on the
// simulated hosts of TestMultiHost: jobs of `vigil agent` (PMIx bootstrap,
// 4 hosts × 4 ranks placed round-robin, h = 20 ms, δ = 500 ms) run one
// after another for VIGIL_CAMPAIGN (a Go duration, default 60s; give go
// test a -timeout above it). In each job random faults come one at a time,
// each checked before the next: every survivor has reported exactly the
// ranks gone and no live rank was reported, except by a rank cut off or
// paused once declared dead, until it learns it is evicted (mhJob.judge).
// The faults (campaignKinds):
//
//   - kill -9 of a live rank: reported by every survivor;
//   - kill -9 of 2–4 live ranks consecutive on the ring (in rank order
//     among the survivors, wrapping) at the same instant, the shape of a
//     host crash under block placement: all reported by every survivor;
//   - SIGSTOP of a live rank for 100–350 ms, below δ − h, then SIGCONT:
//     nobody reports anything;
//   - SIGSTOP of a live rank held until every survivor has reported it (at
//     least 1–1.5 s, above δ), then SIGCONT: it is told it is evicted;
//   - a host's link delayed by 100–300 ms, below δ − h, for 2–4 s: nobody
//     reports anything;
//   - 10–30 % of a host's frames, both ways, lost for 2–4 s: nobody
//     reports anything (a rank is suspected only after δ/h = 25 heartbeats
//     in a row are lost);
//   - a partition: a host's link down until every survivor has reported its
//     live ranks (at least 1.5–3 s), then up again. Holding most of the
//     job dead, every cut-off rank must have stopped during the cut, as a
//     minority (detector quorum.go): its evicted line, which reaches
//     mpirun only once the link is back, says "minority partition" and
//     was printed before the heal; no cut-off rank learned anything after
//     it. Then the survivors' reports are checked as after any fault, so
//     the heal evicted or misled no majority rank;
//   - a host killed (its link cut, then every process in it killed): its
//     live ranks reported by every survivor.
//
// Faults that lose ranks keep the ranks gone under half the job (by
// default more than half stops the survivors too: docs/partitions.md), so
// a job ends when 7 of its 16 ranks are gone, when no fault is safe (a
// host's faults need a host with live ranks and a link), or when the
// campaign's time is spent. The seed is logged
// (VIGIL_CAMPAIGN_SEED replays its choices); VIGIL_CAMPAIGN_KINDS (comma
// separated) restricts the kinds, VIGIL_CAMPAIGN_LOSS fixes the loss rate
// (0 to 1) to measure where loss makes Vigil report live ranks. A summary
// line ends the log, failed or not: jobs, faults by kind, false and
// missed reports (both must be 0), and the worst detection time by kind
// (when the last survivor knew of every rank the fault took).
func TestMultiHostCampaign(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mpirun across network namespaces")
	}
	mpitest.NeedHosts(t)
	c := newCampaign(t)
	defer c.summary()
	for c.jobs == 0 || time.Now().Before(c.end) {
		c.job()
	}
}

// campaign is the state of TestMultiHostCampaign across jobs.
type campaign struct {
	t        *testing.T
	hosts    *mpitest.Hosts
	rng      *rand.Rand
	seed     uint64
	argv     []string
	h, delta time.Duration
	kinds    []string
	loss     float64 // VIGIL_CAMPAIGN_LOSS, or 0: random
	start    time.Time
	end      time.Time

	jobs    int
	nfaults int
	faults  map[string]int
	worst   map[string]time.Duration
	falses  int
	missed  int
	excused int
	current string // the fault under way

	// cutStopped counts cut-off ranks that stopped as a minority during a
	// partition; cutStop is the longest time from a cut to such a stop.
	cutStopped int
	cutStop    time.Duration
}

func newCampaign(t *testing.T) *campaign {
	dur, explicit := 60*time.Second, false
	if s := os.Getenv("VIGIL_CAMPAIGN"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("VIGIL_CAMPAIGN=%q: want a positive Go duration such as 2h (%v)", s, err)
		}
		dur, explicit = d, true
	}
	// A job, its last fault and its end take up to about 2 min more.
	const margin = 2 * time.Minute
	if dl, ok := t.Deadline(); ok && time.Until(dl) < dur+margin {
		if explicit {
			t.Fatalf("VIGIL_CAMPAIGN=%v does not fit in go test's -timeout (%v left): run with -timeout %v", dur, time.Until(dl).Round(time.Second), (dur + margin + time.Minute).Round(time.Minute))
		}
		dur = max(time.Until(dl)-margin, 10*time.Second)
		t.Logf("the default campaign is cut to %v to fit in go test's -timeout", dur.Round(time.Second))
	}
	seed := rand.Uint64()
	if s := os.Getenv("VIGIL_CAMPAIGN_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("VIGIL_CAMPAIGN_SEED=%q: %v", s, err)
		}
	}
	kinds := campaignKinds
	if s := os.Getenv("VIGIL_CAMPAIGN_KINDS"); s != "" {
		kinds = strings.Split(s, ",")
		for _, k := range kinds {
			if !slices.Contains(campaignKinds, k) {
				t.Fatalf("VIGIL_CAMPAIGN_KINDS: no fault kind %q (kinds: %s)", k, strings.Join(campaignKinds, ","))
			}
		}
	}
	var loss float64
	if s := os.Getenv("VIGIL_CAMPAIGN_LOSS"); s != "" {
		var err error
		if loss, err = strconv.ParseFloat(s, 64); err != nil || loss <= 0 || loss > 1 {
			t.Fatalf("VIGIL_CAMPAIGN_LOSS=%q: want a rate in (0, 1] (%v)", s, err)
		}
	}
	const h, delta = 20 * time.Millisecond, 500 * time.Millisecond
	c := &campaign{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), seed: seed, h: h, delta: delta, kinds: kinds, loss: loss,
		argv:   []string{pmixVigil(t), "agent", "-h", h.String(), "-delta", delta.String()},
		faults: map[string]int{}, worst: map[string]time.Duration{}}
	c.hosts = mpitest.NewHosts(t, 4, 0, 1, 2, 3) // every link relayed: delay and loss anywhere
	c.start = time.Now()
	c.end = c.start.Add(dur)
	t.Logf("campaign: seed %d (VIGIL_CAMPAIGN_SEED=%d replays it), %v, kinds %s", seed, seed, dur, strings.Join(kinds, ","))
	return c
}

// summary logs the campaign's summary line.
func (c *campaign) summary() {
	var byKind, worst []string
	for _, k := range campaignKinds {
		byKind = append(byKind, fmt.Sprintf("%s %d", k, c.faults[k]))
		if w, ok := c.worst[k]; ok {
			worst = append(worst, fmt.Sprintf("%s %v", k, w.Round(100*time.Microsecond)))
		}
	}
	status := "passed"
	if c.t.Failed() {
		status = "FAILED during fault " + c.current
	}
	c.t.Logf("campaign summary: %s; seed %d, %v, %d jobs, %d faults (%s), false reports %d, missed reports %d, excused reports by cut-off ranks %d; "+
		"cut-off ranks stopped as a minority during the partitions: %d, at most %v after the cut; worst detection: %s",
		status, c.seed, time.Since(c.start).Round(time.Second), c.jobs, c.nfaults, strings.Join(byKind, ", "),
		c.falses, c.missed, c.excused, c.cutStopped, c.cutStop.Round(time.Millisecond), strings.Join(worst, ", "))
}

// campaignJob is one job of the campaign.
type campaignJob struct {
	*campaign
	n               int
	m               *mhJob
	pids            map[int]int
	onHost          [][]uint32 // the ranks of each host
	gone, survivors map[uint32]bool
	exempt          map[uint32]int64
	down            map[int]bool    // hosts killed
	excused         map[string]bool // excused reports so far
}

// job runs one job until 7 of its ranks are gone (one more would be half),
// no fault is safe or the campaign's time is spent.
func (c *campaign) job() {
	c.jobs++
	const nh, ppn = 4, 4
	j := &campaignJob{campaign: c, n: nh * ppn, gone: map[uint32]bool{}, survivors: map[uint32]bool{},
		exempt: map[uint32]int64{}, down: map[int]bool{}, onHost: make([][]uint32, nh), excused: map[string]bool{}}
	c.current = fmt.Sprintf("start of job %d", c.jobs)
	t0 := time.Now()
	j.m = newMHJob(c.t, c.hosts.Start(c.t, j.n, ppn, nil, []string{"--map-by", "node"}, c.argv...))
	j.m.awaitReady(j.n)
	ready := node.Mono()
	var hostOf map[int]int
	j.pids, hostOf = c.hosts.WaitPIDs(j.n, 10*time.Second)
	for r := range uint32(j.n) {
		j.survivors[r] = true
		j.onHost[hostOf[int(r)]] = append(j.onHost[hostOf[int(r)]], r)
	}
	for i := range nh {
		if len(j.onHost[i]) != ppn {
			c.t.Fatalf("job %d: host %d runs ranks %v, want %d ranks", c.jobs, i, j.onHost[i], ppn)
		}
	}
	c.t.Logf("job %d: %d ranks on %d hosts ready after %v", c.jobs, j.n, nh, time.Since(t0).Round(time.Millisecond))
	defer j.stop()
	// Past the start grace (2 s + δ from each rank's start).
	time.Sleep(time.Duration(ready+int64(2*time.Second+2*c.delta)-node.Mono()) + 300*time.Millisecond)

	for 2*(len(j.gone)+1) < j.n && time.Now().Before(c.end) {
		kind, host := j.pick()
		if kind == "" {
			c.t.Logf("job %d: no safe fault left", c.jobs)
			return
		}
		c.nfaults++
		c.faults[kind]++
		c.current = fmt.Sprintf("%d (%s, job %d)", c.nfaults, kind, c.jobs)
		at := time.Since(c.start)
		outcome := j.inject(kind, host)
		j.verify()
		c.t.Logf("fault %d [job %d, +%v] %s: %s; check passed (%d survivors)", c.nfaults, c.jobs, at.Round(100*time.Millisecond), kind, outcome, len(j.survivors))
	}
}

// liveOn returns the live ranks of host i.
func (j *campaignJob) liveOn(i int) []uint32 {
	var out []uint32
	for _, r := range j.onHost[i] {
		if j.survivors[r] {
			out = append(out, r)
		}
	}
	return out
}

// pick draws a safe fault and, for a host's fault, its host; "" if none.
func (j *campaignJob) pick() (kind string, host int) {
	type choice struct {
		kind  string
		hosts []int
	}
	var live []int // hosts with live ranks and their link
	for i := range j.onHost {
		if !j.down[i] && len(j.liveOn(i)) > 0 {
			live = append(live, i)
		}
	}
	var choices []choice
	for _, k := range j.kinds {
		switch k {
		case ckKill, ckStopShort, ckStopLong:
			choices = append(choices, choice{k, nil})
		case ckBlockKill:
			if j.lossRoom() >= 2 {
				choices = append(choices, choice{k, nil})
			}
		case ckDelay, ckLoss:
			if len(live) > 0 {
				choices = append(choices, choice{k, live})
			}
		case ckPartition, ckHostKill:
			var hs []int
			for _, i := range live {
				// Another host keeps live ranks; the ranks gone stay under
				// half the job.
				if len(j.liveOn(i)) < len(j.survivors) && len(j.liveOn(i)) <= j.lossRoom() {
					hs = append(hs, i)
				}
			}
			if len(hs) > 0 {
				choices = append(choices, choice{k, hs})
			}
		}
	}
	if len(choices) == 0 {
		return "", 0
	}
	ch := choices[j.rng.IntN(len(choices))]
	if ch.hosts != nil {
		host = ch.hosts[j.rng.IntN(len(ch.hosts))]
	}
	return ch.kind, host
}

// lossRoom is how many more ranks the job may lose and keep the ranks gone
// under half of it.
func (j *campaignJob) lossRoom() int { return (j.n-1)/2 - len(j.gone) }

// randDur returns a duration in [lo, hi).
func (c *campaign) randDur(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(c.rng.Int64N(int64(hi-lo)))
}

// randRank returns a random survivor.
func (j *campaignJob) randRank() uint32 {
	s := keys(j.survivors)
	return s[j.rng.IntN(len(s))]
}

// lose moves ranks rs from the survivors to gone; exempt (since, when > 0)
// excuses their reports of live ranks from then on.
func (j *campaignJob) lose(rs []uint32, since int64) {
	for _, r := range rs {
		j.gone[r] = true
		delete(j.survivors, r)
		if since > 0 {
			j.exempt[r] = since
		}
	}
}

// inject runs one fault and waits for its outcome; it returns what
// happened, for the log.
func (j *campaignJob) inject(kind string, host int) string {
	c := j.campaign
	switch kind {
	case ckKill:
		r := j.randRank()
		t0 := node.Mono()
		if err := syscall.Kill(j.pids[int(r)], syscall.SIGKILL); err != nil {
			c.t.Fatalf("kill -9 rank %d: %v", r, err)
		}
		j.lose([]uint32{r}, 0)
		return fmt.Sprintf("rank %d; %s", r, j.reported(kind, t0, []uint32{r}))

	case ckBlockKill:
		live := keys(j.survivors) // in rank order: the ring's
		k := 2 + j.rng.IntN(min(3, j.lossRoom()-1))
		first := j.rng.IntN(len(live))
		block := make([]uint32, k)
		for i := range block {
			block[i] = live[(first+i)%len(live)]
		}
		t0 := node.Mono()
		for _, r := range block {
			if err := syscall.Kill(j.pids[int(r)], syscall.SIGKILL); err != nil {
				c.t.Fatalf("kill -9 rank %d: %v", r, err)
			}
		}
		j.lose(block, 0)
		return fmt.Sprintf("ranks %v; %s", block, j.reported(kind, t0, block))

	case ckStopShort:
		r, d := j.randRank(), c.randDur(100*time.Millisecond, 350*time.Millisecond)
		j.signal(r, syscall.SIGSTOP)
		time.Sleep(d)
		j.signal(r, syscall.SIGCONT)
		time.Sleep(2 * c.delta)
		return fmt.Sprintf("rank %d stopped for %v: no report expected", r, d.Round(time.Millisecond))

	case ckStopLong:
		r, d := j.randRank(), c.randDur(2*c.delta, 3*c.delta)
		t0 := node.Mono()
		j.signal(r, syscall.SIGSTOP)
		j.lose([]uint32{r}, t0)
		rep := j.reported(kind, t0, []uint32{r})
		time.Sleep(time.Duration(t0 + int64(d) - node.Mono()))
		held := time.Duration(node.Mono() - t0)
		j.signal(r, syscall.SIGCONT)
		evicted := j.evicted([]uint32{r})
		time.Sleep(2 * c.delta)
		return fmt.Sprintf("rank %d stopped for %v; %s; evicted %v after SIGCONT", r, held.Round(time.Millisecond), rep, evicted.Round(time.Millisecond))

	case ckDelay:
		d, hold := c.randDur(100*time.Millisecond, 300*time.Millisecond), c.randDur(2*time.Second, 4*time.Second)
		c.hosts.Delay(host, d)
		time.Sleep(hold)
		c.hosts.Delay(host, 0)
		time.Sleep(2*c.delta + d)
		return fmt.Sprintf("host %d (live ranks %v) delayed by %v for %v: no report expected", host, j.liveOn(host), d.Round(time.Millisecond), hold.Round(time.Millisecond))

	case ckLoss:
		rate := c.loss
		if rate == 0 {
			rate = float64(100+c.rng.IntN(201)) / 1000
		}
		hold := c.randDur(2*time.Second, 4*time.Second)
		c.hosts.Loss(host, rate)
		time.Sleep(hold)
		c.hosts.Loss(host, 0)
		time.Sleep(2 * c.delta)
		return fmt.Sprintf("host %d (live ranks %v) losing %.1f %% of its frames both ways for %v: no report expected", host, j.liveOn(host), 100*rate, hold.Round(time.Millisecond))

	case ckPartition:
		cut, hold := j.liveOn(host), c.randDur(3*c.delta, 6*c.delta)
		t0 := node.Mono()
		c.hosts.LinkDown(host)
		j.lose(cut, t0)
		rep := j.reported(kind, t0, cut)
		time.Sleep(time.Duration(t0 + int64(hold) - node.Mono()))
		held := time.Duration(node.Mono() - t0)
		c.hosts.LinkUp(host)
		healed := node.Mono()
		// The cut-off ranks' lines reach mpirun through their host's
		// daemon, over the link: only now. Each stopped during the cut,
		// as a minority, and learned nothing afterwards.
		j.m.await("partition: the cut-off ranks' stops", campaignReportWait, func() string {
			for _, r := range cut {
				if _, ok := j.m.stops[r]; !ok {
					return fmt.Sprintf("cut-off rank %d (which reported %v) has not said it stopped", r, keys(j.m.dead[r]))
				}
			}
			return ""
		})
		var stop time.Duration
		j.m.mu.Lock()
		for _, r := range cut {
			ln := j.m.stops[r]
			at := time.Duration(ln.Mono - t0)
			if ln.Reason != launch.ReasonMinority || ln.Mono >= healed {
				c.t.Errorf("partition: cut-off rank %d stopped %v after the cut with reason %q, want %q during the cut (%v)", r, at, ln.Reason, launch.ReasonMinority, held)
			}
			stop = max(stop, at)
			for d, dl := range j.m.dead[r] {
				if dl.DeliveredMono > ln.Mono {
					c.t.Errorf("partition: cut-off rank %d learned of rank %d %v after the cut, after it stopped", r, d, time.Duration(dl.DeliveredMono-t0))
				}
			}
		}
		j.m.mu.Unlock()
		if c.t.Failed() {
			c.t.FailNow()
		}
		c.cutStopped += len(cut)
		c.cutStop = max(c.cutStop, stop)
		time.Sleep(2 * c.delta)
		return fmt.Sprintf("host %d (live ranks %v) cut off for %v; %s; all stopped as a minority by %v after the cut",
			host, cut, held.Round(time.Millisecond), rep, stop.Round(time.Millisecond))

	case ckHostKill:
		dead := j.liveOn(host)
		t0 := node.Mono()
		c.hosts.LinkDown(host)
		c.hosts.Kill(host)
		j.down[host] = true
		j.lose(dead, 0)
		return fmt.Sprintf("host %d (live ranks %v); %s", host, dead, j.reported(kind, t0, dead))
	}
	c.t.Fatalf("no fault kind %q", kind)
	return ""
}

// signal sends sig to rank r.
func (j *campaignJob) signal(r uint32, sig syscall.Signal) {
	if err := syscall.Kill(j.pids[int(r)], sig); err != nil {
		j.t.Fatalf("%v to rank %d: %v", sig, r, err)
	}
}

// reported waits until every survivor has reported every rank gone,
// counting the reports still missing at campaignReportWait as missed and
// failing then, and records the detection time of kind.
func (j *campaignJob) reported(kind string, t0 int64, ds []uint32) string {
	c := j.campaign
	missing, exited := pollJob(&j.m.mu, j.m.j, campaignReportWait, func() string { return j.m.missing(j.gone, j.survivors) })
	if missing != "" {
		j.m.mu.Lock()
		for r := range j.survivors {
			for d := range j.gone {
				if _, ok := j.m.dead[r][d]; !ok {
					c.missed++
				}
			}
		}
		j.m.mu.Unlock()
		c.t.Fatalf("%s: %s (mpirun exited: %v, after at most %v)\nstderr:\n%s", kind, missing, exited, campaignReportWait, j.m.j.Stderr())
	}
	first, last := j.m.timing(t0, ds, j.survivors)
	c.worst[kind] = max(c.worst[kind], last)
	bound := j.bound(kind, len(ds))
	if last > bound {
		c.t.Errorf("%s of %v: every survivor knew after %v, beyond the bound %v", kind, ds, last, bound)
	}
	return fmt.Sprintf("reported by the first survivor after %v, by all %d after %v (bound %v)", first.Round(100*time.Microsecond),
		len(j.survivors), last.Round(100*time.Microsecond), bound.Round(time.Millisecond))
}

// bound is when every survivor must know f ranks gone at once by a fault
// of kind: seed 000's T(f) (hb.Bound), and for a block of ranks
// consecutive on the ring the tighter bound of block mending
// (hb.BlockBound), with t one message plus one check period as in the demo.
func (j *campaignJob) bound(kind string, f int) time.Duration {
	c := j.campaign
	check := node.Config{HeartbeatPeriod: c.h, SuspectTimeout: c.delta}.WithDefaults().CheckPeriod
	t := int64(c.h/3 + check)
	b := hb.Bound(f, j.n, int64(c.delta), t)
	if kind == ckBlockKill {
		b = min(b, hb.BlockBound(f, node.DefaultMendProbe, j.n, int64(c.delta), t))
	}
	return time.Duration(b)
}

// evicted waits until every rank of rs has said it is evicted, and
// returns how long that took.
func (j *campaignJob) evicted(rs []uint32) time.Duration {
	t0 := time.Now()
	j.m.await("evicted", campaignEvictWait, func() string {
		for _, r := range rs {
			if !j.m.evicted[r] {
				return fmt.Sprintf("rank %d (which reported %v) not evicted", r, keys(j.m.dead[r]))
			}
		}
		return ""
	})
	return time.Since(t0)
}

// verify counts and logs the false and missed reports so far, failing the
// test on any.
func (j *campaignJob) verify() {
	c := j.campaign
	v := j.m.judge(j.gone, j.survivors, j.exempt)
	for _, e := range v.excused {
		if !j.excused[e] {
			j.excused[e] = true
			c.excused++
		}
	}
	c.falses += len(v.falses)
	c.missed += len(v.missed)
	for _, s := range append(v.falses, v.missed...) {
		c.t.Errorf("fault %s: %s", c.current, s)
	}
	if len(v.falses)+len(v.missed) > 0 {
		c.t.FailNow()
	}
}

// stop ends the job: the hosts' links back up and clean, mpirun
// terminated (killed after 10 s) and every process of the hosts killed.
func (j *campaignJob) stop() {
	c := j.campaign
	for i := range c.hosts.N() {
		c.hosts.LinkUp(i)
		c.hosts.Delay(i, 0)
		c.hosts.Loss(i, 0)
	}
	job := j.m.j
	if !job.Terminate(10 * time.Second) {
		c.t.Logf("job %d: mpirun still running 10 s after SIGTERM: killing it", c.jobs)
		syscall.Kill(-job.Cmd.Process.Pid, syscall.SIGKILL)
	}
	for i := range c.hosts.N() {
		c.hosts.Kill(i)
	}
	select {
	case <-job.Exited():
	case <-time.After(15 * time.Second):
		c.t.Fatalf("job %d: mpirun still running 15 s after SIGKILL", c.jobs)
	}
}
