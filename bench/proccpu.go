package bench

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ThreadCost is one thread's CPU account since it started: on-CPU time
// (schedstat, nanoseconds) and context switches, voluntary and
// involuntary (status).
type ThreadCost struct {
	OnCPUNs     uint64
	CtxSwitches uint64
}

// ProcCost is a process's CPU account, thread by thread, read at At.
type ProcCost struct {
	At      time.Time
	Threads map[int]ThreadCost
}

// ReadProcCost reads the account of every thread of pid from /proc
// (/proc/<pid>/task/<tid>/schedstat and status). A thread that exits
// while it reads is left out; a process that is gone is an error.
func ReadProcCost(pid int) (ProcCost, error) {
	tids, err := Threads(pid)
	if err != nil {
		return ProcCost{}, err
	}
	c := ProcCost{Threads: make(map[int]ThreadCost, len(tids))}
	for _, tid := range tids {
		st, err := ReadSchedstat(pid, tid)
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
		if err != nil {
			continue
		}
		vol, invol, err := ParseCtxSwitches(string(b))
		if err != nil {
			return ProcCost{}, fmt.Errorf("bench: thread %d of pid %d: %w", tid, pid, err)
		}
		c.Threads[tid] = ThreadCost{OnCPUNs: st.OnCPUNs, CtxSwitches: vol + invol}
	}
	if len(c.Threads) == 0 {
		return ProcCost{}, fmt.Errorf("bench: pid %d: no readable thread", pid)
	}
	c.At = time.Now()
	return c, nil
}

// Since returns what the process used between earlier and c: on-CPU time
// of all its threads, of thread tid alone (0 when tid is not one of them),
// and context switches. A thread absent from earlier started since and
// counts whole; the last interval of a thread that exited since is lost.
func (c ProcCost) Since(earlier ProcCost, tid int) (cpu, tidCPU time.Duration, ctxSwitches uint64) {
	for t, now := range c.Threads {
		before := earlier.Threads[t]
		d := time.Duration(sub0(now.OnCPUNs, before.OnCPUNs))
		cpu += d
		if t == tid {
			tidCPU = d
		}
		ctxSwitches += sub0(now.CtxSwitches, before.CtxSwitches)
	}
	return cpu, tidCPU, ctxSwitches
}

// sub0 is a − b, or 0 when b > a (a counter read out of order).
func sub0(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

// ParseCtxSwitches reads the voluntary_ctxt_switches and
// nonvoluntary_ctxt_switches lines of a /proc status file.
func ParseCtxSwitches(status string) (voluntary, involuntary uint64, err error) {
	var seenV, seenI bool
	for _, line := range strings.Split(status, "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *uint64
		switch name {
		case "voluntary_ctxt_switches":
			if seenV {
				return 0, 0, fmt.Errorf("bench: status: %s twice", name)
			}
			dst, seenV = &voluntary, true
		case "nonvoluntary_ctxt_switches":
			if seenI {
				return 0, 0, fmt.Errorf("bench: status: %s twice", name)
			}
			dst, seenI = &involuntary, true
		default:
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("bench: status: %s: %w", name, err)
		}
		*dst = n
	}
	if !seenV || !seenI {
		return 0, 0, fmt.Errorf("bench: status: no voluntary_ctxt_switches and nonvoluntary_ctxt_switches")
	}
	return voluntary, involuntary, nil
}

// MachineCPU is the machine's CPU account so far, from /proc/stat: idle
// time (idle and iowait; measured to the nanosecond by the kernel on a
// tickless system, where the busy counters are only sampled at each
// tick) and the time the hypervisor took (steal), summed over CPUs, and
// the number of CPUs.
type MachineCPU struct {
	Idle, Steal time.Duration
	CPUs        int
}

// ReadMachineCPU reads /proc/stat.
func ReadMachineCPU() (MachineCPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return MachineCPU{}, err
	}
	return ParseMachineCPU(string(b))
}

// Busy returns the CPU time the machine spent running anything between
// earlier and m, elapsed apart.
func (m MachineCPU) Busy(earlier MachineCPU, elapsed time.Duration) time.Duration {
	return elapsed*time.Duration(m.CPUs) - (m.Idle - earlier.Idle) - (m.Steal - earlier.Steal)
}

// ParseMachineCPU decodes /proc/stat: the "cpu" line (USER_HZ ticks of
// 10 ms) and the count of "cpuN" lines.
func ParseMachineCPU(stat string) (MachineCPU, error) {
	lines := strings.Split(stat, "\n")
	f := strings.Fields(lines[0])
	if len(f) < 9 || f[0] != "cpu" {
		return MachineCPU{}, fmt.Errorf("bench: /proc/stat: first line %q: want \"cpu\" and at least 8 values", lines[0])
	}
	var v [8]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i+1], 10, 36) // 2³⁶ ticks are 21 years of CPU: several of them fit a Duration
		if err != nil {
			return MachineCPU{}, fmt.Errorf("bench: /proc/stat: value %q: %w", f[i+1], err)
		}
		v[i] = n
	}
	m := MachineCPU{Idle: time.Duration(v[3]+v[4]) * 10 * time.Millisecond, Steal: time.Duration(v[7]) * 10 * time.Millisecond}
	for _, l := range lines[1:] {
		if name, _, _ := strings.Cut(l, " "); len(name) > 3 && strings.HasPrefix(name, "cpu") {
			if _, err := strconv.ParseUint(name[3:], 10, 32); err == nil {
				m.CPUs++
			}
		}
	}
	if m.CPUs == 0 {
		return MachineCPU{}, errors.New("bench: /proc/stat: no cpuN line")
	}
	return m, nil
}
