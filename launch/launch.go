// Package launch starts a Vigil job on this machine: N processes
// bootstrapped by the local launcher, by default agents (`vigil agent`)
// whose event lines it collects, or any program (Options.Stdout). `vigil
// run`, the demo and the multi-process tests use it.
package launch

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/bootstrap/local"
)

// SchemaVersion is the version of the agent's output lines (Line.V). It
// grows when a field changes meaning or goes away, not when one is added.
const SchemaVersion = 1

// The reasons of an "evicted" line (Line.Reason).
const (
	// ReasonDeclaredDead: the job declared this rank dead (it was paused
	// or cut off for longer than δ) and told it so; the agent exits 1.
	ReasonDeclaredDead = "declared dead"
	// ReasonMinority: the rank stopped on its own, holding most of the
	// job dead (the minority side of a partition, or most ranks lost at
	// once); the agent exits 3 (docs/partitions.md).
	ReasonMinority = "minority partition"
)

// Line is one JSON line an agent prints on its standard output (the
// schema is in docs/configuration.md, "Agent output"). Every field of the line's Ev
// (its ev tag) is written, at zero too; a field of another kind only when
// set (MarshalJSON decides, not the json tags, which only name the keys).
type Line struct {
	// V is the schema version (SchemaVersion) on every line.
	V int `json:"v" ev:"*"`
	// Ev is "ready", "dead", "evicted", "stats", "failed" or "bye". An agent
	// that leaves or is evicted prints "stats" first.
	Ev string `json:"ev" ev:"*"`
	// Rank is the reporting agent.
	Rank uint32 `json:"rank" ev:"*"`
	// Mono is the agent's CLOCK_MONOTONIC (ns) when it printed the line.
	Mono int64 `json:"mono" ev:"*"`

	// For "ready": the TCP address the agent published to the other ranks
	// (empty over verbs).
	Addr string `json:"addr" ev:"ready"`
	// For "ready" with -metrics-addr: the metrics endpoint's address.
	Metrics string `json:"metrics" ev:"ready"`

	// For "dead": the rank gone, whether it left cleanly, who detected it
	// and when (detector's wall clock), and when this agent learned it.
	Dead          uint32 `json:"dead" ev:"dead"`
	Left          bool   `json:"left" ev:"dead"`
	Detector      uint32 `json:"detector" ev:"dead"`
	DetectedUnix  int64  `json:"detected_unix" ev:"dead"`
	DeliveredMono int64  `json:"delivered_mono" ev:"dead"`

	// For "evicted": why this agent stopped: ReasonDeclaredDead or
	// ReasonMinority.
	Reason string `json:"reason" ev:"evicted"`

	// For "stats": missed heartbeat deadlines and the worst lateness.
	Missed    uint64 `json:"missed" ev:"stats"`
	MaxLateNs int64  `json:"max_late_ns" ev:"stats"`
	Rejected  uint64 `json:"rejected" ev:"stats"`
	RealTime  bool   `json:"realtime" ev:"stats"`
	// NativeEmitter: the heartbeat thread ran in C, outside the Go
	// runtime (heartbeat.EmitterStats.Native).
	NativeEmitter bool `json:"native_emitter" ev:"stats"`
	// Held is no longer printed (always 0); kept for the readers of
	// older lines.
	Held uint64 `json:"held"`
	// ProcessRT: the whole agent runs real-time (-realtime-process).
	ProcessRT bool `json:"process_rt" ev:"stats"`
	// Counters since the start (node.Stats): heartbeats sent, messages
	// sent and received, messages the transport dropped, broadcasts started
	// and forwarded, messages that made no sense, event-loop wake-ups.
	HeartbeatsSent  uint64 `json:"hb_sent" ev:"stats"`
	MsgsSent        uint64 `json:"msgs_sent" ev:"stats"`
	MsgsRecv        uint64 `json:"msgs_recv" ev:"stats"`
	MsgsDropped     uint64 `json:"msgs_dropped" ev:"stats"`
	BcastsStarted   uint64 `json:"bcasts_started" ev:"stats"`
	BcastsForwarded uint64 `json:"bcasts_forwarded" ev:"stats"`
	Bad             uint64 `json:"bad" ev:"stats"`
	LoopWakes       uint64 `json:"loop_wakes" ev:"stats"`
	// Node counters since the start, as on the metrics endpoint: crashed
	// ranks learned (own detections included), ranks learned to have
	// left cleanly, crashes this rank's observer detected, agreement
	// decisions reached.
	DeathsLearned uint64 `json:"deaths_learned" ev:"stats"`
	Departures    uint64 `json:"departures" ev:"stats"`
	Reported      uint64 `json:"reported" ev:"stats"`
	Agreements    uint64 `json:"agreements" ev:"stats"`
	// RejectedBy is Rejected per reason (wire.Reason names, as the
	// metrics endpoint's vigil_frames_rejected_total{reason}), only the
	// reasons seen so far.
	RejectedBy map[string]uint64 `json:"rejected_by" ev:"stats"`
	// Bytes of the protocol messages the transport wrote and received
	// (their encodings, without the framing).
	BytesSent uint64 `json:"bytes_sent" ev:"stats"`
	BytesRecv uint64 `json:"bytes_recv" ev:"stats"`
	// Agreement calls that returned a decision, their total and their
	// longest time (ns).
	AgreeCalls uint64 `json:"agree_calls" ev:"stats"`
	AgreeNs    uint64 `json:"agree_ns" ev:"stats"`
	AgreeMaxNs int64  `json:"agree_max_ns" ev:"stats"`
	// ByKind counts the protocol messages per kind (node.MsgKinds names,
	// as the metrics endpoint's kind label), only the kinds seen so far.
	ByKind map[string]KindCount `json:"by_kind" ev:"stats"`
}

// KindCount is one message kind's counters in a stats line: messages
// sent (one per destination) and received, and their bytes (the
// message's encoding, without the transport's framing).
type KindCount struct {
	Sent      uint64 `json:"sent"`
	Recv      uint64 `json:"recv"`
	BytesSent uint64 `json:"bytes_sent"`
	BytesRecv uint64 `json:"bytes_recv"`
}

// MarshalJSON writes l with every field of its kind (the field's ev tag
// names the kinds, "*" every line), zeros, false, rank 0 and empty objects
// included; a field of another kind only when set.
func (l Line) MarshalJSON() ([]byte, error) {
	v := reflect.ValueOf(l)
	b := []byte{'{'}
	for _, f := range reflect.VisibleFields(v.Type()) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		fv := v.FieldByIndex(f.Index)
		if fv.IsZero() && !appliesTo(f.Tag.Get("ev"), l.Ev) {
			continue
		}
		var val []byte
		if fv.Kind() == reflect.Map && fv.IsNil() {
			val = []byte("{}")
		} else {
			var err error
			if val, err = json.Marshal(fv.Interface()); err != nil {
				return nil, err
			}
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, name)
		b = append(append(b, ':'), val...)
	}
	return append(b, '}'), nil
}

// appliesTo reports whether a field tagged ev:"tag" belongs on a line of
// kind ev: "*" is every line, otherwise a comma-separated list of kinds.
func appliesTo(tag, ev string) bool {
	return tag == "*" || (tag != "" && slices.Contains(strings.Split(tag, ","), ev))
}

// Proc is one agent process.
type Proc struct {
	Rank   uint32
	Cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// Pid is the process's id.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Exited is closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Err is the process's exit error, once Exited is closed.
func (p *Proc) Err() error { return p.err }

// Job is a running set of agents.
type Job struct {
	Procs []*Proc
	// Lines receives every line of every agent. It is closed once every
	// agent's output has ended. Its buffer is large; a reader must keep up.
	Lines <-chan Line
	srv   *local.Server
	pgid  int // the agents' process group (the first agent's pid)
	wg    sync.WaitGroup
	ready []Line // by rank, as WaitReady read them
}

// Options tunes Start.
type Options struct {
	// Stderr receives the agents' standard error (default os.Stderr).
	Stderr io.Writer
	// ExtraEnv is added to every agent's environment.
	ExtraEnv []string
	// Stdout, if set, receives the processes' standard output as it is,
	// for a program that is not an agent: its lines are not read, and
	// Lines receives nothing (it is closed once every process exited).
	Stdout io.Writer
}

// Start launches n copies of argv (argv[0] is the program, looked up in
// PATH unless it contains a slash) with the local bootstrap in their
// environment. Each process runs in its own process group (a terminal's
// Ctrl-C reaches the launcher alone, which decides what to forward) and is
// killed if the launcher dies.
func Start(n int, argv []string, opt Options) (*Job, error) {
	if n < 1 {
		return nil, fmt.Errorf("launch: -n %d, want ≥ 1", n)
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("launch: no program")
	}
	if opt.Stderr == nil {
		opt.Stderr = os.Stderr
	}
	srv, err := local.NewServer(n)
	if err != nil {
		return nil, err
	}
	lines := make(chan Line, 64*n+1024)
	j := &Job{Lines: lines, srv: srv}
	// Every rank is started before any is waited for: a rank that exits at
	// once stays a zombie until then, so that its process group, the
	// job's, still exists when the next ranks join it.
	var readers []func()
	follow := func() {
		for _, f := range readers {
			go f()
		}
		go func() { j.wg.Wait(); close(lines) }()
	}
	for r := 0; r < n; r++ {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(append(os.Environ(), opt.ExtraEnv...), srv.Identity(uint32(r)).Env()...)
		cmd.Stderr = opt.Stderr
		// One process group for the whole job (the first rank's), so that
		// Stop reaches every rank with one signal (Stop).
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true, Pgid: j.pgid}
		var out io.Reader = strings.NewReader("")
		if opt.Stdout != nil {
			cmd.Stdout = opt.Stdout
		} else {
			var err error
			if out, err = cmd.StdoutPipe(); err != nil {
				follow()
				j.Stop(0)
				return nil, err
			}
		}
		if err := cmd.Start(); err != nil {
			follow()
			j.Stop(0)
			return nil, fmt.Errorf("launch: starting rank %d: %w", r, err)
		}
		if r == 0 {
			j.pgid = cmd.Process.Pid
		}
		p := &Proc{Rank: uint32(r), Cmd: cmd, exited: make(chan struct{})}
		j.Procs = append(j.Procs, p)
		j.wg.Add(1)
		readers = append(readers, func() {
			defer j.wg.Done()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var l Line
				if json.Unmarshal(sc.Bytes(), &l) == nil && l.Ev != "" {
					lines <- l
				}
			}
			p.err = cmd.Wait()
			close(p.exited)
		})
	}
	follow()
	return j, nil
}

// Signal sends sig to rank r.
func (j *Job) Signal(r uint32, sig syscall.Signal) error {
	if int(r) >= len(j.Procs) {
		return fmt.Errorf("launch: no rank %d", r)
	}
	return j.Procs[r].Cmd.Process.Signal(sig)
}

// Stop asks every agent to leave (SIGTERM), waits up to grace, then kills
// what is left and releases the bootstrap. The whole job gets the signal
// at once, from one kill of the agents' process group: a launcher sending
// it agent by agent gets little CPU once the first agents leave (their
// threads are real-time), and the job would stop over a second or more,
// the later agents still observing the earlier ones.
func (j *Job) Stop(grace time.Duration) {
	// A stopped agent cannot handle SIGTERM.
	if j.pgid == 0 || syscall.Kill(-j.pgid, syscall.SIGCONT) != nil || syscall.Kill(-j.pgid, syscall.SIGTERM) != nil {
		for _, p := range j.Procs {
			p.Cmd.Process.Signal(syscall.SIGCONT)
			p.Cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.After(grace)
	for _, p := range j.Procs {
		select {
		case <-p.exited:
		case <-deadline:
		}
	}
	for _, p := range j.Procs {
		select {
		case <-p.exited:
		default:
			p.Cmd.Process.Kill()
			<-p.exited
		}
	}
	j.srv.Close()
}

// WaitReady waits for a "ready" line from every rank, returning the other
// lines it read meanwhile.
func (j *Job) WaitReady(ctx context.Context) ([]Line, error) {
	ready := map[uint32]bool{}
	var other []Line
	if j.ready == nil {
		j.ready = make([]Line, len(j.Procs))
	}
	for len(ready) < len(j.Procs) {
		select {
		case l, ok := <-j.Lines:
			if !ok {
				return other, fmt.Errorf("launch: agents exited before all were ready (%d of %d)", len(ready), len(j.Procs))
			}
			if l.Ev == "ready" {
				ready[l.Rank] = true
				if int(l.Rank) < len(j.ready) {
					j.ready[l.Rank] = l
				}
			} else {
				other = append(other, l)
			}
		case <-ctx.Done():
			return other, fmt.Errorf("launch: %d of %d agents ready: %w", len(ready), len(j.Procs), ctx.Err())
		}
	}
	return other, nil
}

// Ready returns the "ready" line of every rank, indexed by rank, as
// WaitReady read them (a zero Line for a rank it has not seen ready).
func (j *Job) Ready() []Line { return append([]Line(nil), j.ready...) }
