package hb

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// schedFIFO is the SCHED_FIFO policy of sched_setattr(2).
const schedFIFO = 1

// SetProcessFIFO puts every thread of the calling process under SCHED_FIFO
// at priority. Threads the Go runtime creates later inherit the policy from
// the thread that creates them, which is then one of these. It is for a
// process that runs only the detector (vigil agent, vigil daemon): its
// receive path, its checks and the runtime's own threads (the scheduler's
// hand-offs, the garbage collector) then wait for no normal-priority
// thread, so CPU burners delay neither the observer nor the emitter's
// returns through the Go scheduler. Give the emitter a higher priority
// (EmitterConfig.Priority) so that the process's other threads do not hold
// it back. Without privilege it fails with EPERM and changes nothing;
// otherwise it returns the number of threads set.
func SetProcessFIFO(priority int) (int, error) {
	if priority < 1 || priority > 99 {
		return 0, fmt.Errorf("hb: SetProcessFIFO(%d): want a priority of 1–99", priority)
	}
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, fmt.Errorf("hb: SetProcessFIFO: %w", err)
	}
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: schedFIFO, Priority: uint32(priority)}
	n := 0
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetAttr(tid, &attr, 0); err != nil {
			if err == unix.ESRCH { // the thread exited meanwhile
				continue
			}
			if n > 0 { // leave no process half real-time
				normal := unix.SchedAttr{Size: unix.SizeofSchedAttr}
				for _, e := range ents {
					if t, err := strconv.Atoi(e.Name()); err == nil {
						unix.SchedSetAttr(t, &normal, 0)
					}
				}
			}
			return 0, fmt.Errorf("hb: SetProcessFIFO: sched_setattr(thread %d, SCHED_FIFO %d): %w", tid, priority, err)
		}
		n++
	}
	return n, nil
}
