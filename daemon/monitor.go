package daemon

import (
	"fmt"
	"os/exec"

	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
)

// The daemon loop's side of local process monitoring (local.go has the
// operating-system parts): attaching, detaching, hang checks, reports.

// local is one process of this node.
type local struct {
	rank  ranks.Rank
	pid   int
	child *exec.Cmd   // started by the daemon
	watch *pidWatch   // not a child: its pidfd
	cc    *clientConn // attached: its connection
	slot  int         // heartbeat word, -1 if none
	bye   bool        // said goodbye: its end is a departure

	lastWord     uint64
	lastProgress int64 // mono ns
	stoppedSince int64 // mono ns, 0 if running
	gone         bool
}

// localGone tells the loop that a local process ended.
type localGone struct {
	rank  ranks.Rank
	pid   int
	cause Cause
}

// localFailed reports local process lp gone (StartPropagation for a
// process) and forgets it.
func (d *Daemon) localFailed(lp *local, cause Cause) {
	if lp.gone {
		return
	}
	lp.gone = true
	d.release(lp)
	d.log.Info("local process gone", "rank", lp.rank, "pid", lp.pid, "cause", cause)
	d.publish([]ProcFailure{{Rank: lp.rank, Cause: cause}})
}

// release frees lp's watch, connection and heartbeat word.
func (d *Daemon) release(lp *local) {
	if lp.watch != nil {
		lp.watch.Close()
		lp.watch = nil
	}
	if lp.cc != nil {
		lp.cc.close()
		lp.cc = nil
	}
	if lp.slot >= 0 {
		d.free = append(d.free, lp.slot)
		lp.slot = -1
	}
}

// attachLocal admits a process that connected to the local socket.
func (d *Daemon) attachLocal(a attachReq) welcome {
	l := d.cfg.Layout
	no := func(format string, args ...any) welcome {
		return welcome{Error: fmt.Sprintf(format, args...)}
	}
	nd, ok := l.NodeOf(a.rank)
	switch {
	case !ok:
		return no("rank %d is not a rank of this job (%d nodes × %d)", a.rank, l.Nodes, l.PPN)
	case nd != d.cfg.Node:
		return no("rank %d is hosted by node %d, not by this daemon (node %d)", a.rank, nd, d.cfg.Node)
	case d.reported.ProcReported(a.rank):
		return no("rank %d was already reported gone", a.rank)
	}
	lp := d.locals[a.rank]
	switch {
	case lp == nil:
		lp = &local{rank: a.rank, pid: a.cc.pid, slot: -1}
	case lp.pid != a.cc.pid:
		return no("rank %d is process %d, not %d", a.rank, lp.pid, a.cc.pid)
	case lp.cc != nil:
		return no("rank %d is already attached", a.rank)
	}
	if lp.child == nil && lp.watch == nil {
		r, pid := a.rank, a.cc.pid
		w, err := watchPid(pid, func() {
			select {
			case d.gone <- localGone{r, pid, Crashed}:
			case <-d.quit:
			}
		})
		if err != nil {
			return no("%v", err)
		}
		lp.watch = w
	}
	if len(d.free) == 0 {
		return no("no free heartbeat word (PPN = %d)", l.PPN)
	}
	lp.slot = d.free[len(d.free)-1]
	d.free = d.free[:len(d.free)-1]
	d.table.Reset(lp.slot)
	lp.cc = a.cc
	lp.bye = false // back after a goodbye: its end is a failure again
	lp.lastWord, lp.lastProgress = 0, node.Mono()
	d.locals[a.rank] = lp
	// The past failures, from the records: the nodes' (the detector's),
	// then the processes'.
	rec := d.n.Record()
	for i := range d.nodesSeen {
		ev := rec.Event(i)
		lp.cc.send(nodeEvent(ev.Rank, ev.Detector, ev.DetectedAt.UnixNano()))
	}
	for _, ev := range d.reported.Past() {
		lp.cc.send(ev)
	}
	d.log.Info("local process attached", "rank", a.rank, "pid", a.cc.pid, "slot", lp.slot)
	return welcome{OK: true, Slot: lp.slot, HeartbeatNs: int64(d.cfg.HeartbeatPeriod), Node: d.cfg.Node,
		Nodes: l.Nodes, PPN: l.PPN}
}

// detachLocal handles a closed connection: after a goodbye the process's
// end will be a departure; without one, the process only stopped talking
// to the daemon (its end, if it comes, is still watched). Either way its
// heartbeat word is no longer checked.
func (d *Daemon) detachLocal(lp *local, bye bool) {
	lp.bye = lp.bye || bye
	lp.cc = nil
	if lp.slot >= 0 {
		d.free = append(d.free, lp.slot)
		lp.slot = -1
	}
	if lp.child == nil && lp.watch == nil {
		delete(d.locals, lp.rank)
	}
}

// kill sends SIGKILL to local process lp through a handle that cannot hit
// another process reusing its pid (os.Process and the pidfd both use one).
func (d *Daemon) kill(lp *local) {
	switch {
	case lp.child != nil:
		lp.child.Process.Kill()
	case lp.watch != nil:
		lp.watch.kill()
	}
}

// checkHangs looks at every local process's heartbeat word and run state.
func (d *Daemon) checkHangs(now int64) {
	to := int64(d.cfg.HangTimeout)
	for _, lp := range d.locals {
		if lp.gone {
			continue
		}
		hung := false
		if lp.slot >= 0 {
			if w := d.table.Load(lp.slot); w != lp.lastWord {
				lp.lastWord, lp.lastProgress = w, now
			} else if now-lp.lastProgress > to {
				hung = true
			}
		}
		if procStopped(lp.pid) {
			if lp.stoppedSince == 0 {
				lp.stoppedSince = now
			} else if now-lp.stoppedSince > to {
				hung = true
			}
		} else {
			lp.stoppedSince = 0
		}
		if hung {
			d.log.Warn("local process hung", "rank", lp.rank, "pid", lp.pid)
			if !d.cfg.KeepHung {
				d.kill(lp)
			}
			d.localFailed(lp, Hung)
		}
	}
}
