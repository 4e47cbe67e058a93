package daemon

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/lab/testnet"
	"github.com/vigil-hpc/vigil/node"
)

// BenchmarkPlacement compares, at equal h and δ, the detection plus
// propagation latency of the two placements of the observation ring, with
// real processes (`vigil daemon` binaries) over loopback TCP:
//
//   - per-process (ULFM's placement): every one of the Nodes×PPN
//     application processes is a member of the ring (run here as a daemon
//     with no local processes, so both placements share the ring, the BMG
//     broadcast and the transport code);
//   - node-level (PRRTE's placement, seed 003): Nodes daemons in the ring,
//     each with PPN attached processes (pidfd + heartbeat word), two-level
//     propagation.
//
// For each, a process crash (SIGKILL of one process) and a node crash
// (SIGKILL of one node's PPN processes, and its daemon) are timed from the
// kill to the moment the last surviving process learned every victim
// (CLOCK_MONOTONIC, same machine). Metrics: ms-last (that time), ms-mean
// (mean over surviving processes), false-susp/run (live processes or
// nodes declared dead during a run, on a loaded machine; they are not
// counted as survivors). Run:
//
//	go test -run '^$' -bench Placement -benchtime 5x ./daemon/
func BenchmarkPlacement(b *testing.B) {
	const nodes, ppn = 4, 4
	dir := b.TempDir()
	bin := buildVigil(b, dir)
	for _, c := range []struct {
		name      string
		nodeLevel bool
		nodeCrash bool
	}{{"per-process/proc-crash", false, false}, {"node-level/proc-crash", true, false},
		{"per-process/node-crash", false, true}, {"node-level/node-crash", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			var last, mean []float64
			falseSusp := 0
			for i := 0; i < b.N; i++ {
				l, m, f := placementRun(b, bin, dir, nodes, ppn, c.nodeLevel, c.nodeCrash)
				last, mean, falseSusp = append(last, l), append(mean, m), falseSusp+f
			}
			slices.Sort(last)
			b.ReportMetric(avg(last), "ms-last")
			b.ReportMetric(avg(mean), "ms-mean")
			b.ReportMetric(last[len(last)-1], "ms-last-max")
			b.ReportMetric(float64(falseSusp)/float64(b.N), "false-susp/run")
		})
	}
}

func avg(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// placementRun runs one scenario and returns the last and mean latencies
// in ms over the surviving processes, and the number of live processes or
// nodes that were falsely suspected (from the start of the run).
func placementRun(b *testing.B, bin, dir string, nodes, ppn int, nodeLevel, nodeCrash bool) (last, mean float64, falseSusp int) {
	b.Helper()
	p := &procs{t: b, lines: make(chan line, 4096)}
	defer p.stop()
	env := []string{"VIGIL_DAEMON_KEY=00112233445566778899aabbccddeeff"}
	ring := nodes * ppn // per-process: every process is a ring member
	dppn := 0
	if nodeLevel {
		ring, dppn = nodes, ppn
	}
	peers := testnet.FreeAddrs(b, ring)
	var pids []int // pid of each ring member
	for i := 0; i < ring; i++ {
		argv := []string{bin, "daemon", "-node", strconv.Itoa(i), "-peers", strings.Join(peers, ","),
			"-ppn", strconv.Itoa(dppn), "-h", "20ms", "-delta", "200ms", "-hang", "2s"}
		if nodeLevel {
			argv = append(argv, "-sock", filepath.Join(dir, fmt.Sprintf("b%d.sock", i)))
		}
		pids = append(pids, p.start(fmt.Sprintf("d%d", i), 0, env, argv...).Process.Pid)
	}
	p.awaitKind("ready", ring, 30*time.Second)
	var procPids []int // node-level: the attached processes, by rank
	if nodeLevel {
		for r := 0; r < nodes*ppn; r++ {
			nd := r / ppn
			procPids = append(procPids, p.start(fmt.Sprintf("r%d", r), pids[nd], nil, bin, "daemon",
				"-attach", filepath.Join(dir, fmt.Sprintf("b%d.sock", nd)), "-rank", strconv.Itoa(r)).Process.Pid)
		}
		p.awaitKind("attached", nodes*ppn, 30*time.Second)
	}
	time.Sleep(node.DefaultStartGrace + 400*time.Millisecond) // past the ring's start grace

	// Victims: rank 5 (node 1), or all of node 1 (ranks 4..7).
	victims := []int{5}
	if nodeCrash {
		victims = []int{4, 5, 6, 7}
	}
	t0 := node.Mono()
	switch {
	case !nodeLevel:
		for _, v := range victims {
			syscall.Kill(pids[v], syscall.SIGKILL)
		}
	case nodeCrash:
		syscall.Kill(-pids[1], syscall.SIGKILL) // daemon 1 and its processes
	default:
		syscall.Kill(procPids[5], syscall.SIGKILL)
	}
	// Who must learn: every surviving process (per-process: the ring
	// members; node-level: the attached processes), each victim once.
	want := map[string]int64{}
	for r := 0; r < nodes*ppn; r++ {
		if slices.Contains(victims, r) {
			continue
		}
		for _, v := range victims {
			who := fmt.Sprintf("d%d", r)
			if nodeLevel {
				who = fmt.Sprintf("r%d", r)
			}
			want[fmt.Sprintf("%s %d", who, v)] = 0
		}
	}
	// A live process falsely declared dead (or a daemon evicted after a
	// false suspicion, taking its processes' reports with it) is no longer
	// a survivor: it is counted as a false suspicion and dropped.
	left, falseSusp := len(want), 0
	dropped := map[string]bool{}
	drop := func(who string) {
		if dropped[who] {
			return
		}
		dropped[who] = true
		for _, v := range victims {
			k := fmt.Sprintf("%s %d", who, v)
			if at, ok := want[k]; ok {
				delete(want, k)
				if at == 0 {
					left--
				}
			}
		}
	}
	dropNode := func(d int) { // node-level: the processes of node d
		for r := d * ppn; r < (d+1)*ppn; r++ {
			drop(fmt.Sprintf("r%d", r))
		}
	}
	suspected := map[int]bool{}
	deadline := time.After(30 * time.Second)
	for left > 0 {
		select {
		case l := <-p.lines:
			var v int
			switch {
			case l.Kind == "evicted" && !nodeLevel:
				drop(l.who)
				continue
			case l.Kind == "evicted":
				dropNode(int(l.Self))
				continue
			case !nodeLevel && l.Kind == KindNode:
				if v = int(l.Node); !slices.Contains(victims, v) {
					if !suspected[v] {
						suspected[v] = true
						falseSusp++
					}
					drop(fmt.Sprintf("d%d", v))
					continue
				}
			case nodeLevel && l.Kind == KindNode:
				if d := int(l.Node); !nodeCrash || d != 1 {
					if !suspected[-1-d] {
						suspected[-1-d] = true
						falseSusp++
					}
					dropNode(d)
				}
				continue
			case nodeLevel && l.Kind == KindProc && strings.HasPrefix(l.who, "r"):
				if v = int(l.Rank); !slices.Contains(victims, v) {
					if l.Cause != NodeDown.String() && !suspected[v] {
						suspected[v] = true
						falseSusp++
						drop(fmt.Sprintf("r%d", v))
					}
					continue
				}
			default:
				continue
			}
			k := fmt.Sprintf("%s %d", l.who, v)
			if at, ok := want[k]; ok && at == 0 {
				want[k] = l.Mono
				left--
			}
		case <-deadline:
			b.Fatalf("timed out: %v\n%s", want, p.stderr())
		}
	}
	// Per surviving process: when it knew every victim.
	perProc := map[string]int64{}
	for k, at := range want {
		who := strings.Fields(k)[0]
		perProc[who] = max(perProc[who], at)
	}
	var lastNs, sum int64
	for _, at := range perProc {
		lastNs = max(lastNs, at-t0)
		sum += at - t0
	}
	if len(perProc) == 0 {
		b.Fatalf("no survivor left to report (%d false suspicions)", falseSusp)
	}
	return float64(lastNs) / 1e6, float64(sum) / float64(len(perProc)) / 1e6, falseSusp
}
