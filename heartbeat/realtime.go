package heartbeat

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Scheduling policies of sched_setattr(2).
const (
	schedFIFO = 1
	schedRR   = 2
)

// ThreadSched returns the scheduling policy (0 normal, 1 SCHED_FIFO, as
// sched_setattr(2) numbers them) and the real-time priority of thread tid
// of process pid, read from /proc/<pid>/task/<tid>/stat (fields 41 and 40).
func ThreadSched(pid, tid int) (policy, priority int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
	if err != nil {
		return 0, 0, err
	}
	// The command, field 2, may hold spaces and parentheses: count fields
	// from the last ')'; f[0] is field 3.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("heartbeat: /proc/%d/task/%d/stat: no command field", pid, tid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 39 {
		return 0, 0, fmt.Errorf("heartbeat: /proc/%d/task/%d/stat: %d fields after the command, want 39", pid, tid, len(f))
	}
	if priority, err = strconv.Atoi(f[37]); err == nil {
		policy, err = strconv.Atoi(f[38])
	}
	if err != nil {
		return 0, 0, fmt.Errorf("heartbeat: /proc/%d/task/%d/stat: %w", pid, tid, err)
	}
	return policy, priority, nil
}

// SetProcessRealTime puts every thread of the calling process under
// SCHED_RR at priority. Threads the Go runtime creates later inherit the
// policy from the thread that creates them, which is then one of these. It
// is for a process that runs only the detector (vigil agent, vigil daemon):
// its receive path, its checks and the runtime's own threads (the
// scheduler's hand-offs, the garbage collector) then wait for no
// normal-priority thread, so CPU burners delay neither the observer nor the
// emitter's returns through the Go scheduler. The policy is round-robin,
// not FIFO: the Go runtime has spin-waits (the background sweeper's wait
// for other sweepers, for one) that need another of its threads to run, and
// under SCHED_FIFO a spinning thread never yields to a runnable thread of
// its own priority, so with every CPU held by such spinners the process
// livelocks. Round-robin time slices bound that wait. Give the emitter a
// higher priority (EmitterConfig.Priority; it runs SCHED_FIFO) so that the
// process's other threads do not hold it back. Without privilege it fails
// with EPERM and changes nothing; otherwise it returns the number of
// threads set.
func SetProcessRealTime(priority int) (int, error) {
	if priority < 1 || priority > 99 {
		return 0, fmt.Errorf("heartbeat: SetProcessRealTime(%d): want a priority of 1–99", priority)
	}
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: schedRR, Priority: uint32(priority)}
	// A thread being created while the threads are walked inherits the
	// policy of its creator, which may not be switched yet: walk again
	// until a walk finds no thread not seen before.
	done := map[int]bool{}
	for pass := 0; pass < 16; pass++ {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return 0, fmt.Errorf("heartbeat: SetProcessRealTime: %w", err)
		}
		fresh := false
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			fresh = true
			if err := unix.SchedSetAttr(tid, &attr, 0); err != nil {
				if err == unix.ESRCH { // the thread exited meanwhile
					continue
				}
				// Leave no process half real-time.
				normal := unix.SchedAttr{Size: unix.SizeofSchedAttr}
				for t := range done {
					unix.SchedSetAttr(t, &normal, 0)
				}
				return 0, fmt.Errorf("heartbeat: SetProcessRealTime: sched_setattr(thread %d, SCHED_RR %d): %w", tid, priority, err)
			}
			done[tid] = true
		}
		if !fresh {
			break
		}
	}
	n := len(done)
	return n, nil
}
