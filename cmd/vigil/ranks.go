package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/launch"
)

// vigil run's exit status, beyond 0 (every rank exited with status 0), 1
// (vigil run itself failed) and 2 (a bad invocation).
const (
	// exitRanksFailed: a rank exited with a non-zero status, none was
	// killed by a signal.
	exitRanksFailed = 3
	// exitRanksKilled: a rank was killed by a signal (kill -9, or a
	// forwarded SIGINT or SIGTERM it did not handle).
	exitRanksKilled = 4
)

// exitError is an error with its own exit status; main prints its message
// (if any) and exits with code.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// rankWatch follows the processes of a job `vigil run` launched: it prints
// the rank → pid table, each rank's exit as it comes, with the time since
// the start, and the final status naming the ranks that died.
type rankWatch struct {
	job       *launch.Job
	out       io.Writer // vigil run's own lines
	start     time.Time
	startMono int64 // node.Mono at start, the agents' clock
	exits     chan *launch.Proc
	live      int
}

// watchRanks starts following job's processes, started at start (wall
// clock, and node.Mono for the agents' lines).
func watchRanks(job *launch.Job, out io.Writer, start time.Time, startMono int64) *rankWatch {
	w := &rankWatch{job: job, out: out, start: start, startMono: startMono,
		exits: make(chan *launch.Proc, len(job.Procs)), live: len(job.Procs)}
	for _, p := range job.Procs {
		go func() { <-p.Exited(); w.exits <- p }()
	}
	return w
}

// table prints every rank's pid.
func (w *rankWatch) table(what string) {
	fmt.Fprintf(w.out, "vigil run: %d ranks of %s\n", len(w.job.Procs), what)
	tw := tabwriter.NewWriter(w.out, 6, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rank\tpid\t")
	for _, p := range w.job.Procs {
		fmt.Fprintf(tw, "%d\t%d\t\n", p.Rank, p.Pid())
	}
	tw.Flush()
}

// stamp is the time since the start, as printed before a report.
func stamp(d time.Duration) string { return fmt.Sprintf("[+%.3fs]", d.Seconds()) }

// now is stamp of the current time.
func (w *rankWatch) now() string { return stamp(time.Since(w.start)) }

// at is stamp of an agent's CLOCK_MONOTONIC reading (launch.Line.Mono).
func (w *rankWatch) at(mono int64) string { return stamp(time.Duration(mono - w.startMono)) }

// pid returns rank r's pid, or 0 for a rank out of range.
func (w *rankWatch) pid(r uint32) int {
	if int(r) >= len(w.job.Procs) {
		return 0
	}
	return w.job.Procs[r].Pid()
}

// exited reports p's exit (received from exits).
func (w *rankWatch) exited(p *launch.Proc) {
	w.live--
	fmt.Fprintf(w.out, "%s vigil run: rank %d (pid %d) %s\n", w.now(), p.Rank, p.Pid(), howExited(p.Err()))
}

// signal sends sig to every rank still running.
func (w *rankWatch) signal(sig os.Signal) {
	for _, p := range w.job.Procs {
		select {
		case <-p.Exited():
		default:
			p.Cmd.Process.Signal(sig)
		}
	}
}

// status is vigil run's result once every rank has exited: nil when all
// exited with status 0, else an exitError naming the ranks that did not.
func (w *rankWatch) status() error {
	var died []string
	code := 0
	for _, p := range w.job.Procs {
		err := p.Err()
		if err == nil {
			continue
		}
		died = append(died, fmt.Sprintf("rank %d (pid %d) %s", p.Rank, p.Pid(), howExited(err)))
		code = max(code, exitRanksFailed)
		if ws, ok := waitStatus(err); ok && ws.Signaled() {
			code = exitRanksKilled
		}
	}
	if code == 0 {
		return nil
	}
	return exitError{code, fmt.Sprintf("vigil run: %d of %d ranks died: %s", len(died), len(w.job.Procs), strings.Join(died, ", "))}
}

// waitStatus is the wait status in a process's exit error.
func waitStatus(err error) (syscall.WaitStatus, bool) {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 0, false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ws, ok
}

// howExited describes a process's exit from its Wait error.
func howExited(err error) string {
	if err == nil {
		return "exited with status 0"
	}
	ws, ok := waitStatus(err)
	switch {
	case !ok:
		return "failed: " + err.Error()
	case ws.Signaled():
		return "killed by " + signalName(ws.Signal())
	default:
		return fmt.Sprintf("exited with status %d", ws.ExitStatus())
	}
}

// signalName is sig's name, such as SIGKILL.
func signalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok && unix.SignalName(s) != "" {
		return unix.SignalName(s)
	}
	return sig.String()
}
