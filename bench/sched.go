package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vigil-hpc/vigil/heartbeat"
)

// Thread classes tracked by the scheduling attribution.
const (
	classDetector uint32 = 1 // any thread of a detector process, or the detector threads of an application
	classEmitter  uint32 = 2 // the heartbeat thread
	classApp      uint32 = 3 // an application thread
)

// Attribution is what the scheduler says about the detector and the
// application during a measurement window.
type Attribution struct {
	// Source is "ebpf" (the sched_switch program) or "schedstat" (the
	// /proc fallback, without preemption counts nor a histogram).
	Source string
	// Why says why the fallback was used (empty with eBPF).
	Why string
	// DetectorCPU and AppCPU are the on-CPU nanoseconds of the detector's
	// threads (emitter included) and of the application's threads, from
	// schedstat (exact, whatever the source).
	DetectorCPU, AppCPU uint64
	// EmitterCPU is the emitter thread's share of DetectorCPU.
	EmitterCPU uint64
	// Preemptions counts the times a detector thread took the CPU from a
	// runnable application thread, and StolenNs how long those detector
	// runs lasted: CPU time taken from the application (eBPF only).
	Preemptions, StolenNs uint64
	// EmitterRunq histograms, in nanoseconds, how long the emitter waited
	// in the run queue between being woken (or preempted) and running
	// (eBPF only): the delay that turns into late heartbeats.
	EmitterRunq Log2Hist
	// EmitterWaitNs and EmitterSlices are schedstat's totals for the
	// emitter thread: run-queue wait and timeslices (both sources).
	EmitterWaitNs, EmitterSlices uint64
}

// Threads lists the threads of pids (from /proc/<pid>/task).
func Threads(pids ...int) ([]int, error) {
	var tids []int
	for _, pid := range pids {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return nil, fmt.Errorf("bench: threads of pid %d: %w", pid, err)
		}
		for _, e := range ents {
			if t, err := strconv.Atoi(e.Name()); err == nil {
				tids = append(tids, t)
			}
		}
	}
	return tids, nil
}

// EmitterThread finds the heartbeat thread among pid's threads: the one
// running under SCHED_FIFO when the emitter got it, else the thread with
// the most voluntary context switches (the emitter sleeps and wakes every
// h; the others mostly sleep). how says which rule picked it.
func EmitterThread(pid int) (tid int, how string, err error) {
	tids, err := Threads(pid)
	if err != nil {
		return 0, "", err
	}
	best, bestSw := -1, int64(-1)
	for _, t := range tids {
		if policy, _, err := heartbeat.ThreadSched(pid, t); err == nil && policy == 1 { // SCHED_FIFO
			return t, "SCHED_FIFO thread", nil
		}
		if sw := statusField(fmt.Sprintf("/proc/%d/task/%d/status", pid, t), "voluntary_ctxt_switches"); sw > bestSw {
			best, bestSw = t, sw
		}
	}
	if best < 0 {
		return 0, "", fmt.Errorf("bench: pid %d has no threads", pid)
	}
	return best, "most voluntary context switches", nil
}

func statusField(path, name string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return -1
}

// Schedstat is one thread's /proc schedstat: on-CPU time, run-queue wait
// and timeslices since the thread started.
type Schedstat struct {
	OnCPUNs, WaitNs, Slices uint64
}

// ParseSchedstat decodes the three numbers of a schedstat file.
func ParseSchedstat(s string) (Schedstat, error) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return Schedstat{}, fmt.Errorf("bench: schedstat %q: want 3 numbers", s)
	}
	var v [3]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return Schedstat{}, fmt.Errorf("bench: schedstat %q: %w", s, err)
		}
		v[i] = n
	}
	return Schedstat{v[0], v[1], v[2]}, nil
}

// ReadSchedstat reads a thread's schedstat (the process's, for tid ≤ 0).
func ReadSchedstat(pid, tid int) (Schedstat, error) {
	p := fmt.Sprintf("/proc/%d/schedstat", pid)
	if tid > 0 {
		p = fmt.Sprintf("/proc/%d/task/%d/schedstat", pid, tid)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return Schedstat{}, err
	}
	return ParseSchedstat(string(b))
}

// schedSnap sums schedstat over the threads of each class.
type schedSnap struct {
	det, app, em Schedstat
}

func (s *Schedstat) add(o Schedstat) {
	s.OnCPUNs += o.OnCPUNs
	s.WaitNs += o.WaitNs
	s.Slices += o.Slices
}

func (s Schedstat) sub(o Schedstat) Schedstat {
	d := func(a, b uint64) uint64 {
		if a < b {
			return 0
		}
		return a - b
	}
	return Schedstat{d(s.OnCPUNs, o.OnCPUNs), d(s.WaitNs, o.WaitNs), d(s.Slices, o.Slices)}
}

// snapSchedstat reads the classes' totals; threads that exited are skipped.
func snapSchedstat(classes map[[2]int]uint32) schedSnap {
	var s schedSnap
	for pt, cls := range classes {
		st, err := ReadSchedstat(pt[0], pt[1])
		if err != nil {
			continue
		}
		switch cls {
		case classApp:
			s.app.add(st)
		case classEmitter:
			s.em.add(st)
			s.det.add(st)
		default:
			s.det.add(st)
		}
	}
	return s
}

// SchedWatch measures an Attribution between Start and Stop: with eBPF
// when permitted, else with /proc schedstat.
type SchedWatch struct {
	classes map[[2]int]uint32 // (pid, tid) → class
	before  schedSnap
	bpf     *bpfSched
	why     string
}

// WatchSched starts watching: every thread of appPids is an application
// thread, every thread of detPids a detector thread, and emitter (pid,
// tid) the heartbeat thread. Threads created later are not seen.
func WatchSched(appPids, detPids []int, emitter [2]int) (*SchedWatch, error) {
	w := &SchedWatch{classes: map[[2]int]uint32{}}
	for _, set := range []struct {
		pids []int
		cls  uint32
	}{{appPids, classApp}, {detPids, classDetector}} {
		for _, pid := range set.pids {
			tids, err := Threads(pid)
			if err != nil {
				return nil, err
			}
			for _, t := range tids {
				w.classes[[2]int{pid, t}] = set.cls
			}
		}
	}
	if emitter[1] > 0 {
		w.classes[emitter] = classEmitter
	}
	w.before = snapSchedstat(w.classes)
	b, err := startBPFSched(w.classes)
	if err != nil {
		w.why = err.Error()
	} else {
		w.bpf = b
	}
	return w, nil
}

// Stop ends the window and returns what was measured.
func (w *SchedWatch) Stop() Attribution {
	after := snapSchedstat(w.classes)
	det, app, em := after.det.sub(w.before.det), after.app.sub(w.before.app), after.em.sub(w.before.em)
	a := Attribution{Source: "schedstat", Why: w.why, DetectorCPU: det.OnCPUNs, AppCPU: app.OnCPUNs,
		EmitterCPU: em.OnCPUNs, EmitterWaitNs: em.WaitNs, EmitterSlices: em.Slices}
	if w.bpf != nil {
		r, err := w.bpf.read()
		w.bpf.close()
		if err != nil {
			a.Why = "reading the BPF maps: " + err.Error()
			return a
		}
		a.Source, a.Why = "ebpf", ""
		a.Preemptions, a.StolenNs, a.EmitterRunq = r.Preemptions, r.StolenNs, r.EmitterRunq
	}
	return a
}

// tracefs is where the kernel's tracepoints are described.
const tracefs = "/sys/kernel/tracing"

// ensureTracefs mounts tracefs when it is not mounted.
func ensureTracefs() error {
	if _, err := os.Stat(filepath.Join(tracefs, "events")); err == nil {
		return nil
	}
	if err := mountTracefs(); err != nil {
		return fmt.Errorf("tracefs is not mounted at %s and mounting it failed: %w", tracefs, err)
	}
	return nil
}

// tracepointOffset reads a field's offset from a tracepoint's format file.
func tracepointOffset(group, name, field string) (int16, error) {
	b, err := os.ReadFile(filepath.Join(tracefs, "events", group, name, "format"))
	if err != nil {
		return 0, err
	}
	return parseFieldOffset(string(b), field)
}

// parseFieldOffset finds "field:<type> <field>;\toffset:N;" in a format.
func parseFieldOffset(format, field string) (int16, error) {
	for _, line := range strings.Split(format, "\n") {
		parts := strings.Split(strings.TrimSpace(line), ";")
		if len(parts) < 2 || !strings.HasPrefix(parts[0], "field:") {
			continue
		}
		decl := strings.Fields(strings.TrimPrefix(parts[0], "field:"))
		if len(decl) == 0 || decl[len(decl)-1] != field {
			continue
		}
		off, ok := strings.CutPrefix(strings.TrimSpace(parts[1]), "offset:")
		if !ok {
			break
		}
		n, err := strconv.ParseInt(off, 10, 16)
		if err != nil {
			return 0, fmt.Errorf("bench: offset of %s: %w", field, err)
		}
		return int16(n), nil
	}
	return 0, errors.New("bench: tracepoint format has no field " + field)
}
