package bench

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/launch"
)

// DetectorSpec is a Vigil detector configuration for a run.
type DetectorSpec struct {
	// H is the heartbeat period and Delta the suspicion time-out.
	H, Delta time.Duration
	// Grace is the start-up grace (0: the agent's default, 2 s + δ).
	Grace time.Duration
	// RealTime asks for SCHED_FIFO for the emitter thread.
	RealTime bool
	// RealTimeProcess makes every thread of each agent real-time (SCHED_RR)
	// (node.Config.RealTimeProcess; with RealTime).
	RealTimeProcess bool
	// Check is the observer's check period (0: the agent's default).
	Check time.Duration
	// Heartbeat, when not empty, is passed to the agents as -heartbeat
	// (the heartbeat path: udp, shm).
	Heartbeat string
	// Emitter, when not empty, is passed to the agents as -emitter
	// (native or go).
	Emitter string
}

// AgentJob is a stand-alone detector: N `vigil agent` processes started by
// the local launcher, separate from the application's processes.
type AgentJob struct {
	job  *launch.Job
	done chan struct{}
	mu   sync.Mutex // guards log until done is closed
	log  []launch.Line
}

// AgentReport is what the agents said by the time they stopped.
type AgentReport struct {
	// Suspicions counts "dead" reports (one per reporting rank and dead
	// rank); Suspected the distinct ranks reported dead.
	Suspicions, Suspected int
	// Missed sums the emitters' missed heartbeat deadlines and MaxLate is
	// the worst wake-up lateness.
	Missed  uint64
	MaxLate time.Duration
	// FIFO counts the emitters that ran under SCHED_FIFO.
	FIFO int
	// Evicted counts agents that were declared dead by the others.
	Evicted int
	// Held sums the observers' checks held by the receive-path guard.
	Held uint64
	// ProcessRT counts the agents that ran wholly real-time.
	ProcessRT int
}

// StartAgents launches n agents of the vigil binary and waits until all
// are ready.
func StartAgents(vigilBin string, n int, d DetectorSpec, stderr io.Writer) (*AgentJob, error) {
	args := []string{vigilBin, "agent", "-h", d.H.String(), "-delta", d.Delta.String(),
		"-realtime=" + fmt.Sprint(d.RealTime),
		"-realtime-process=" + fmt.Sprint(d.RealTimeProcess)}
	if d.Grace > 0 {
		args = append(args, "-grace", d.Grace.String())
	}
	if d.Check > 0 {
		args = append(args, "-check", d.Check.String())
	}
	if d.Heartbeat != "" {
		args = append(args, "-heartbeat", d.Heartbeat)
	}
	if d.Emitter != "" {
		args = append(args, "-emitter", d.Emitter)
	}
	return startJob(n, args, launch.Options{Stderr: stderr})
}

// startJob launches n copies of argv with the local launcher and waits
// until every one has printed its "ready" line (the agent's format).
func startJob(n int, argv []string, opt launch.Options) (*AgentJob, error) {
	if opt.Stderr == nil {
		opt.Stderr = io.Discard
	}
	job, err := launch.Start(n, argv, opt)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pre, err := job.WaitReady(ctx)
	if err != nil {
		job.Stop(time.Second)
		return nil, err
	}
	a := &AgentJob{job: job, done: make(chan struct{}), log: pre}
	go func() {
		defer close(a.done)
		for l := range job.Lines {
			a.mu.Lock()
			a.log = append(a.log, l)
			a.mu.Unlock()
		}
	}()
	return a, nil
}

// Lines returns the agents' lines so far.
func (a *AgentJob) Lines() []launch.Line {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]launch.Line(nil), a.log...)
}

// Ready returns the agents' "ready" lines, indexed by rank.
func (a *AgentJob) Ready() []launch.Line {
	r := make([]launch.Line, len(a.job.Procs))
	for _, l := range a.job.Ready() {
		if int(l.Rank) < len(r) {
			r[l.Rank] = l
		}
	}
	return r
}

// Pids returns the agents' process IDs.
func (a *AgentJob) Pids() []int {
	p := make([]int, len(a.job.Procs))
	for i, pr := range a.job.Procs {
		p[i] = pr.Cmd.Process.Pid
	}
	return p
}

// Exited returns, for each agent in Pids order, a channel closed when
// that agent has exited.
func (a *AgentJob) Exited() []<-chan struct{} {
	e := make([]<-chan struct{}, len(a.job.Procs))
	for i, pr := range a.job.Procs {
		e[i] = pr.Exited()
	}
	return e
}

// Stop stops the agents (they leave cleanly and print their statistics)
// and summarizes what they reported.
func (a *AgentJob) Stop() AgentReport {
	a.job.Stop(5 * time.Second)
	<-a.done
	return summarizeAgentLines(a.log)
}

// summarizeAgentLines turns agent lines into a report. A clean departure
// ("left") at the end is not a suspicion.
func summarizeAgentLines(lines []launch.Line) AgentReport {
	var r AgentReport
	dead := map[uint32]bool{}
	for _, l := range lines {
		switch l.Ev {
		case "dead":
			if !l.Left {
				r.Suspicions++
				dead[l.Dead] = true
			}
		case "stats":
			r.Missed += l.Missed
			r.MaxLate = max(r.MaxLate, time.Duration(l.MaxLateNs))
			r.Held += l.Held
			if l.RealTime {
				r.FIFO++
			}
			if l.ProcessRT {
				r.ProcessRT++
			}
		case "evicted":
			r.Evicted++
		}
	}
	r.Suspected = len(dead)
	return r
}

// Burners keeps every CPU busy with n spinning processes (a compute-only
// load): `sh -c 'while :; do :; done'`.
type Burners struct{ cmds []*exec.Cmd }

// StartBurners starts n burners (n ≤ 0: one per CPU).
func StartBurners(n int) (*Burners, error) {
	if n <= 0 {
		n = runtime.NumCPU()
	}
	b := &Burners{}
	for range n {
		c := exec.Command("sh", "-c", "while :; do :; done")
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			b.Stop()
			return nil, fmt.Errorf("bench: starting a CPU burner: %w", err)
		}
		b.cmds = append(b.cmds, c)
	}
	return b, nil
}

// Pids returns the burners' process IDs.
func (b *Burners) Pids() []int {
	p := make([]int, len(b.cmds))
	for i, c := range b.cmds {
		p[i] = c.Process.Pid
	}
	return p
}

// Stop kills the burners and reaps them.
func (b *Burners) Stop() {
	for _, c := range b.cmds {
		c.Process.Kill()
		c.Wait()
	}
	b.cmds = nil
}
