// Command vigil-bench runs Vigil's benchmarks and the papers' simulations.
// It is the command of the bench module (bench/go.mod), so that the
// harness's dependencies (memberlist, cilium/ebpf, gonum/plot) stay out of
// the product's vigil binary, whose agents it runs (-vigil).
//
//	vigil-bench quick|full        every part with the quick or full profile
//	vigil-bench <part>            one part (-profile quick|full)
//	vigil-bench sim <sub>         simulations of the papers' results
//	vigil-bench child ...         a child process of the harness
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/bench"
)

var benchUsage = `usage: vigil-bench <name> [flags]

names:
  quick | full        every part with the quick (≤ 10 min) or full profile
  ` + strings.Join(append(slices.Clone(bench.Parts), bench.ExtraParts...), ", ") + `
                      one part (-profile quick|full)
  sim <stab|probe|bcast|era|tsweep|hostcrash|all>
                      simulations of the papers' results (vigil-bench sim -h)
  child vigil|memberlist ...
                      a head-to-head child process (started by h2h)
  child emitter ...   the Go emitter alone (started by lateness)
  hostile             attacks on the heartbeat path against running agents:
                      a UDP flood at every UDP port of one (from its own or
                      a forged address), the replay of a killed rank's
                      captured heartbeats (vigil-bench hostile -h)

The agents are the product's ` + "`vigil agent`" + ` (-vigil; default: the vigil
next to this executable, else built from the source tree into -out/build).
Outputs go to -out: CSV files, PNG plots and SUMMARY.md.
`

func main() {
	var err error
	switch {
	case len(os.Args) > 1 && os.Args[1] == "sim":
		err = simMain(os.Args[2:])
	case len(os.Args) > 1 && os.Args[1] == "hostile":
		err = hostileMain(os.Args[2:])
	default:
		err = benchMain(os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vigil-bench:", err)
		os.Exit(1)
	}
}

func benchMain(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "help" {
		fmt.Fprint(os.Stderr, benchUsage)
		if len(args) == 0 {
			return errors.New("bench: name missing")
		}
		return nil
	}
	name, args := args[0], args[1:]
	if name == "child" {
		if len(args) == 0 {
			return errors.New("child: want vigil, memberlist or emitter")
		}
		switch args[0] {
		case "vigil":
			return bench.VigilChild(args[1:], os.Stdout)
		case "memberlist":
			return bench.MemberlistChild(args[1:], os.Stdout)
		case "emitter":
			return bench.EmitterChild(args[1:], os.Stdout)
		}
		return fmt.Errorf("child: %q: want vigil, memberlist or emitter", args[0])
	}
	profile := "quick"
	var parts []string
	switch {
	case name == "quick" || name == "full":
		profile = name
	case slices.Contains(bench.Parts, name) || slices.Contains(bench.ExtraParts, name):
		parts = []string{name}
	default:
		fmt.Fprint(os.Stderr, benchUsage)
		return fmt.Errorf("bench: unknown name %q", name)
	}
	fs := flag.NewFlagSet("vigil-bench "+name, flag.ContinueOnError)
	out := fs.String("out", "", "output directory (default bench-out/<name>)")
	vigilBin := fs.String("vigil", "", "the product's vigil executable, for its agents (default: next to vigil-bench, else built from -root)")
	root := fs.String("root", "", "Vigil source tree, for bench/csrc and ./capi (default: found from the working directory)")
	summary := fs.String("summary", "", "also write the markdown summary to this file (e.g. bench/SUMMARY.md)")
	only := fs.String("parts", "", "with quick/full: comma-separated subset of "+strings.Join(append(slices.Clone(bench.Parts), bench.ExtraParts...), ","))
	if len(parts) > 0 {
		fs.StringVar(&profile, "profile", "quick", "profile: quick or full")
	}
	guardHs := fs.String("guard-hs", "", "rtprocess part: comma-separated heartbeat periods (default: the profile's)")
	guardRounds := fs.Int("guard-rounds", 0, "rtprocess part: on/off pairs per load and h (default: the profile's)")
	costHs := fs.String("cost-hs", "", "cost part: comma-separated heartbeat periods (default: the profile's)")
	costNs := fs.String("cost-ns", "", "cost part: comma-separated numbers of processes (default: the profile's)")
	costTransports := fs.String("cost-transports", "", "cost part: comma-separated transports, udp and/or shm (default: the profile's)")
	costRounds := fs.Int("cost-rounds", 0, "cost part: rounds per configuration, each one run of every side (default: the profile's)")
	costHeartbeat := fs.String("cost-heartbeat", bench.CostHeartbeatMatch, "cost part: pass -heartbeat VALUE to the agents; \""+
		bench.CostHeartbeatMatch+"\" passes each configuration's transport (udp or shm); empty: not passed")
	h2hSystems := fs.String("h2h-systems", "", "h2h part: comma-separated systems among vigil, vigil-late (block mending probing at the suspicion, not δ/2 earlier) and memberlist (default vigil,memberlist)")
	propNs := fs.String("propagation-ns", "", "propagation part: comma-separated numbers of agents (default: the profile's)")
	propRuns := fs.Int("propagation-runs", 0, "propagation part: runs per broadcast and size (default: the profile's)")
	propStep := fs.String("propagation-gossip-step", "", "propagation part: -gossip-step for the corrected gossips, -gossip-latency twice that (default: the agents')")
	costGoEmitter := fs.Bool("cost-go-emitter", false, "cost part: also run the agents with their heartbeat thread in Go (-emitter go), beside the native thread")
	costDelta := fs.Duration("cost-delta", 0, "cost part: δ on every side, the check period δ/10 (default: max(10h, 100 ms))")
	costInProcess := fs.Bool("cost-in-process", false, "cost part: also run libvigil's detector in a host process (default: the profile's; full: on)")
	stormN := fs.Int("storm-n", 128, "storm part: ranks per job")
	stormKs := fs.String("storm-k", "", "storm part: comma-separated burst sizes k (default: the profile's; quick 1,16, full 1,4,8,16,32,64)")
	stormRuns := fs.Int("storm-runs", 0, "storm part: runs per k, burst mode, target and system (default: the profile's; quick 1, full 3)")
	stormModes := fs.String("storm-modes", "kill,stop", "storm part: comma-separated burst modes: kill (kill -9) and/or stop (SIGSTOP for 2δ + 20 ms, then SIGCONT)")
	stormTargets := fs.String("storm-targets", "ranks,hosts", "storm part: comma-separated targets: ranks (k at random) and/or hosts (whole pretended hosts of -storm-ranks-per-host ranks, the agents told the placement)")
	stormPerHost := fs.Int("storm-ranks-per-host", 8, "storm part: ranks per pretended host")
	stormSystems := fs.String("storm-systems", "vigil,memberlist", "storm part: comma-separated systems: vigil and/or memberlist")
	stormH := fs.Duration("storm-h", 10*time.Millisecond, "storm part: Vigil's heartbeat period, memberlist's probe interval")
	stormDelta := fs.Duration("storm-delta", 50*time.Millisecond, "storm part: Vigil's δ")
	stormMLPeriod := fs.Duration("storm-memberlist-period", 200*time.Millisecond, "storm part: memberlist's probe interval, its probe time-out half that (128 members probing every 10 or 100 ms never all joined on a loaded 2-core machine)")
	stormMLWait := fs.Duration("storm-memberlist-wait", 12*time.Second, "storm part: how long memberlist's survivors are watched after a burst (its suspicion lasts 4·log10(N) probe intervals or more)")
	stormWait := fs.Duration("storm-wait", 3*time.Second, "storm part: how long the survivors are watched after a burst")
	stormAcc := fs.Bool("storm-accuracy", true, "storm part: also the accuracy-at-scale rows (the cost part at -cost-delta 20ms with h=1ms and 50ms with h=10ms, under 2 CPU burners)")
	stormBursts := fs.Bool("storm-bursts", true, "storm part: the bursts (false: only the accuracy-at-scale rows)")
	stormAccNs := fs.String("storm-accuracy-ns", "32,64,128", "storm part: comma-separated N of the accuracy-at-scale rows")
	jobStopNs := fs.String("jobstop-ns", "128", "jobstop part: comma-separated job sizes")
	jobStopRuns := fs.Int("jobstop-runs", 20, "jobstop part: stops per size and way")
	jobStopLogs := fs.String("jobstop-logs", "", "jobstop part: a directory for the agents' protocol logs, one JSON file per stop (default: none)")
	jobStopWays := fs.String("jobstop-ways", "group,each", "jobstop part: comma-separated ways to stop: group (one SIGTERM to the agents' process group) and/or each (agent by agent, as mpirun's daemons)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	storm := bench.StormConfig{N: *stormN, Runs: *stormRuns, RanksPerHost: *stormPerHost, H: *stormH, Delta: *stormDelta, Wait: *stormWait,
		MemberlistPeriod: *stormMLPeriod, MemberlistWait: *stormMLWait,
		Modes: splitList(*stormModes), Targets: splitList(*stormTargets)}
	for _, f := range splitList(*stormSystems) {
		storm.Systems = append(storm.Systems, bench.System(f))
	}
	if *stormKs != "" {
		if storm.Ks, err = parseInts("-storm-k", *stormKs, 1); err != nil {
			return err
		}
	}
	stormAccNList, err := parseInts("-storm-accuracy-ns", *stormAccNs, 2)
	if err != nil {
		return err
	}
	if *stormRuns < 0 || *stormN < 4 || *stormH <= 0 || *stormDelta <= *stormH || *stormWait <= 0 {
		return fmt.Errorf("bench: -storm-runs %d, -storm-n %d, -storm-h %v, -storm-delta %v, -storm-wait %v: want runs ≥ 0, n ≥ 4, 0 < h < δ, a positive wait",
			*stormRuns, *stormN, *stormH, *stormDelta, *stormWait)
	}
	jobStop := bench.JobStopConfig{Runs: *jobStopRuns, Ways: splitList(*jobStopWays), AgentLogs: *jobStopLogs}
	if jobStop.Ns, err = parseInts("-jobstop-ns", *jobStopNs, 2); err != nil {
		return err
	}
	for _, w := range jobStop.Ways {
		if w != bench.JobStopGroup && w != bench.JobStopEach {
			return fmt.Errorf("bench: -jobstop-ways %q: want group and/or each", *jobStopWays)
		}
	}
	if *jobStopRuns < 1 {
		return fmt.Errorf("bench: -jobstop-runs %d: want ≥ 1", *jobStopRuns)
	}
	if *only != "" {
		parts = strings.Split(*only, ",")
	}
	pr, err := bench.ProfileNamed(profile)
	if err != nil {
		return err
	}
	if *guardHs != "" {
		if pr.GuardHs, err = parseDurations("-guard-hs", *guardHs); err != nil {
			return err
		}
	}
	if *guardRounds < 0 {
		return fmt.Errorf("bench: -guard-rounds %d: want a positive count", *guardRounds)
	} else if *guardRounds > 0 {
		pr.GuardRounds = *guardRounds
	}
	if *costHs != "" {
		if pr.CostHs, err = parseDurations("-cost-hs", *costHs); err != nil {
			return err
		}
	}
	if *costNs != "" {
		pr.CostNs = nil
		for _, f := range strings.Split(*costNs, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 2 {
				return fmt.Errorf("bench: -cost-ns %q: want numbers ≥ 2 such as 2,8", *costNs)
			}
			pr.CostNs = append(pr.CostNs, n)
		}
	}
	if *propNs != "" {
		pr.PropagationNs = nil
		for _, f := range strings.Split(*propNs, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 2 {
				return fmt.Errorf("bench: -propagation-ns %q: want numbers ≥ 2 such as 16,32", *propNs)
			}
			pr.PropagationNs = append(pr.PropagationNs, n)
		}
	}
	if *propRuns < 0 {
		return fmt.Errorf("bench: -propagation-runs %d: want a positive count", *propRuns)
	} else if *propRuns > 0 {
		pr.PropagationRuns = *propRuns
	}
	if *propStep != "" {
		d, err := parseDurations("-propagation-gossip-step", *propStep)
		if err != nil || len(d) != 1 || d[0] <= 0 {
			return fmt.Errorf("bench: -propagation-gossip-step %q: want one duration > 0 such as 4ms", *propStep)
		}
		pr.PropagationGossipStep = d[0]
	}
	if *costTransports != "" {
		pr.CostTransports = nil
		for _, f := range strings.Split(*costTransports, ",") {
			tr := strings.TrimSpace(f)
			if tr != bench.CostUDP && tr != bench.CostSHM {
				return fmt.Errorf("bench: -cost-transports %q: want %s and/or %s", *costTransports, bench.CostUDP, bench.CostSHM)
			}
			pr.CostTransports = append(pr.CostTransports, tr)
		}
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "cost-in-process" {
			pr.CostInProcess = *costInProcess
		}
	})
	if *h2hSystems != "" {
		pr.H2HSystems = nil
		for _, f := range strings.Split(*h2hSystems, ",") {
			sys := bench.System(strings.TrimSpace(f))
			if sys != bench.Vigil && sys != bench.VigilLate && sys != bench.Memberlist {
				return fmt.Errorf("bench: -h2h-systems %q: want vigil, vigil-late and/or memberlist", *h2hSystems)
			}
			pr.H2HSystems = append(pr.H2HSystems, sys)
		}
	}
	if *costDelta < 0 || *costDelta > 0 && *costDelta < 10*time.Microsecond {
		return fmt.Errorf("bench: -cost-delta %v: want 0 (the default) or at least 10µs", *costDelta)
	}
	if *costRounds < 0 {
		return fmt.Errorf("bench: -cost-rounds %d: want a positive count", *costRounds)
	} else if *costRounds > 0 {
		pr.CostRounds = *costRounds
	}
	if *out == "" {
		*out = filepath.Join("bench-out", name)
	}
	if *root == "" {
		if *root, err = findModuleRoot(); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if *vigilBin == "" {
		if *vigilBin, err = findVigil(self, *root, filepath.Join(*out, "build")); err != nil {
			return err
		}
	} else if *vigilBin, err = filepath.Abs(*vigilBin); err != nil {
		return err
	}
	s := &bench.Suite{Profile: pr, Root: *root, VigilBin: *vigilBin, BenchBin: self, Out: *out, Log: os.Stderr, CostHeartbeat: *costHeartbeat, CostGoEmitter: *costGoEmitter, CostDelta: *costDelta,
		JobStop: jobStop, Storm: storm, StormAccuracy: *stormAcc, StormNoBursts: !*stormBursts, StormAccuracyNs: stormAccNList,
		Command: "vigil-bench " + strings.Join(append([]string{name}, args...), " ")}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	runErr := s.Run(ctx, parts)
	files, err := s.WriteCSVs()
	if err != nil {
		return err
	}
	plots, err := s.WritePlots()
	if err != nil {
		return err
	}
	md := s.Summary(append(files, plots...))
	if err := os.WriteFile(filepath.Join(*out, "SUMMARY.md"), []byte(md), 0o644); err != nil {
		return err
	}
	if *summary != "" {
		if err := os.WriteFile(*summary, []byte(md), 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("vigil-bench: results in %s (SUMMARY.md, %d CSV, %d PNG)\n", *out, len(files), len(plots))
	if runErr != nil {
		return runErr
	}
	if len(s.Errors) > 0 {
		return fmt.Errorf("bench: %d part(s) failed (see SUMMARY.md)", len(s.Errors))
	}
	return nil
}

// parseDurations reads a comma-separated list of positive durations given
// to flag name.
func parseDurations(name, list string) ([]time.Duration, error) {
	var ds []time.Duration
	for _, f := range strings.Split(list, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("bench: %s %q: want positive durations such as 500us,300us", name, list)
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// splitList splits a comma-separated list, trimming blanks and dropping
// empty fields.
func splitList(list string) []string {
	var out []string
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// parseInts reads a comma-separated list of integers ≥ least given to
// flag name.
func parseInts(name, list string, least int) ([]int, error) {
	var out []int
	for _, f := range splitList(list) {
		n, err := strconv.Atoi(f)
		if err != nil || n < least {
			return nil, fmt.Errorf("bench: %s %q: want integers ≥ %d such as 16,32", name, list, least)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bench: %s %q: want at least one number", name, list)
	}
	return out, nil
}

// findVigil returns the product's vigil executable: the one next to self
// (bin/vigil beside bin/vigil-bench), else one built from the source tree
// root into dir.
func findVigil(self, root, dir string) (string, error) {
	if p := filepath.Join(filepath.Dir(self), "vigil"); isExecutable(p) {
		return p, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin, err := filepath.Abs(filepath.Join(dir, "vigil"))
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/vigil")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("bench: building vigil in %s (or pass -vigil): %v\n%s", root, err, out)
	}
	return bin, nil
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// findModuleRoot walks up from the working directory to Vigil's go.mod.
func findModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/vigil-hpc/vigil\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("bench: not inside Vigil's source tree (go.mod of github.com/vigil-hpc/vigil); use -root")
		}
		dir = parent
	}
}

// hostileMain runs the hostile-input checks of the heartbeat path and
// fails when one of them does.
func hostileMain(args []string) error {
	fs := flag.NewFlagSet("vigil-bench hostile", flag.ContinueOnError)
	vigilBin := fs.String("vigil", "", "the product's vigil executable (default: next to vigil-bench, else built from the source tree)")
	n := fs.Int("n", 8, "agents")
	h := fs.Duration("h", 10*time.Millisecond, "heartbeat period (default: vigil run's)")
	delta := fs.Duration("delta", 50*time.Millisecond, "suspicion time-out δ (default: vigil run's)")
	controls := fs.Bool("controls", false, "after each flood run, a control run: the same agents as long, not flooded (reports there are the machine's)")
	modes := fs.String("heartbeat", "shm,udp", "comma-separated heartbeat paths to attack (shm, udp); the replay runs over udp only")
	floodFor := fs.Duration("flood", 30*time.Second, "how long each UDP port is flooded")
	runs := fs.Int("runs", 10, "flood runs per heartbeat path, and replay runs (each with a run without replay)")
	burners := fs.Int("burners", 0, "CPU burners during the floods")
	spoofRate := fs.Float64("spoof-rate", 0, "datagrams per second of the spoof check's flood (0: as fast as one sender can)")
	spoofCopy := fs.Bool("spoof-copy", false, "the spoof check floods copies of a captured heartbeat of the watched emitter with a wrong tag (an attacker who sees the job's frames; -heartbeat udp)")
	checks := fs.String("checks", "flood,replay", "which checks: flood, replay, spoof (the flood from the forged address of the emitter the flooded agent watches: CAP_NET_RAW)")
	agentLog := fs.String("agent-log", "", "append the agents' stderr to this file (default: discarded)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if *vigilBin == "" {
		dir, err := os.MkdirTemp("", "vigil-hostile")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if *vigilBin, err = findVigil(self, "", dir); err != nil {
			return err
		}
	}
	var alog *os.File
	if *agentLog != "" {
		if alog, err = os.OpenFile(*agentLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			return err
		}
		defer alog.Close()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	p := func(f string, a ...any) { fmt.Printf(f, a...) }
	fmt.Printf("vigil-bench hostile %s\n\n", strings.Join(args, " "))
	ok := true
	for _, mode := range strings.Split(*modes, ",") {
		cfg := bench.HostileConfig{VigilBin: *vigilBin, N: *n, H: *h, Delta: *delta, Heartbeat: mode,
			Flood: *floodFor, Runs: *runs, Controls: *controls, Burners: *burners, Log: os.Stderr}
		if alog != nil {
			cfg.AgentLog = alog
		}
		var floods []bench.FloodRow
		var replays []bench.ReplayRow
		if strings.Contains(*checks, "flood") {
			if floods, err = bench.HostileFlood(ctx, cfg); err != nil {
				return err
			}
		}
		if strings.Contains(*checks, "spoof") {
			sc := cfg
			sc.Spoof, sc.SpoofRate, sc.SpoofCopy = true, *spoofRate, *spoofCopy
			spoofs, err := bench.HostileFlood(ctx, sc)
			if err != nil {
				return err
			}
			ok = bench.HostileTable(p, sc, spoofs, nil) && ok
		}
		if strings.Contains(*checks, "replay") && mode == "udp" {
			if replays, err = bench.HostileReplay(ctx, cfg); err != nil {
				return err
			}
		}
		ok = bench.HostileTable(p, cfg, floods, replays) && ok
	}
	if !ok {
		return errors.New("hostile: a check failed")
	}
	return nil
}
