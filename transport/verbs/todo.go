package verbs

import (
	"sync"
	"sync/atomic"

	"github.com/vigil-hpc/vigil/ranks"
)

// todo is t.mu's to-do list: work left for the next holder of the lock by
// a goroutine that could not take it without waiting (a Send, the
// emitter's UD heartbeats and link requests, SetPeers) and by the link
// worker (its results, toEngine). The holder runs the list before its own
// work (drainCmds), in the order it was put. The list has its own small
// mutex, held only to append or to take the whole list, never while a
// command runs; n mirrors its length for the readers that must not take
// that mutex: sleep, which looks at it after setting engine.sleeping
// (put stores it before it looks at sleeping: see nudge), and the
// emitter, which posts a heartbeat itself only when nothing is queued
// before it.
type todo struct {
	mu   sync.Mutex
	cmds []cmd
	// bounded counts the commands in cmds that count against todoMax:
	// all but the link worker's results.
	bounded int
	n       atomic.Int32 // len(cmds)
}

// todoMax bounds the commands of senders on the list. A Send that finds
// it full fails (counted in MsgsDropped), as one to a full peer queue
// does. The link worker's results never count: the worker never waits
// for the lock's holder.
const todoMax = 4096

// cmdOp is what a command asks of the holder of t.mu.
type cmdOp uint8

const (
	opSend      cmdOp = iota // send msg to rank to over the reliable channel
	opHeartbeat              // send heartbeat seq to rank to as a datagram
	opConnect                // start an RC heartbeat link to observer to
	opDo                     // run fn
)

// cmd is one piece of work on the to-do list.
type cmd struct {
	op  cmdOp
	to  ranks.Rank
	seq uint64
	msg []byte       // opSend: the list's own copy
	fn  func(*state) // opDo: run with t.mu held
	// drop, if set, runs instead of fn when the engine has stopped
	// (Close), to free what fn would have kept.
	drop func()
}

// put appends c; bounded says c counts against todoMax. It returns false,
// without appending, if c is bounded and the list holds todoMax such
// commands.
func (l *todo) put(c cmd, bounded bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if bounded {
		if l.bounded >= todoMax {
			return false
		}
		l.bounded++
	}
	l.cmds = append(l.cmds, c)
	l.n.Store(int32(len(l.cmds)))
	return true
}

// take returns every command on the list, in order, and leaves buf
// (emptied) as the list's storage.
func (l *todo) take(buf []cmd) []cmd {
	if l.n.Load() == 0 {
		return buf[:0]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	cs := l.cmds
	l.cmds, l.bounded = buf[:0], 0
	l.n.Store(0)
	return cs
}

// len returns the number of commands on the list.
func (l *todo) len() int { return int(l.n.Load()) }
