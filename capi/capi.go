package main

/*
#cgo CFLAGS: -I${SRCDIR}/../csrc
#define VIGIL_NO_PROTOTYPES
#include <stddef.h>
#include <stdlib.h>
#include "vigil.h"

// The size of vigil_config before its address fields: callers built with
// that header pass it as struct_size.
static size_t vg_config_size_v1(void) { return offsetof(vigil_config, advertise_addr); }
// Its size before the gossip fields (with the address fields). The gossip
// fields put their ints before their int64_ts so that the struct has no
// tail padding: a field added later starts at the sizeof of this version.
static size_t vg_config_size_v2(void) { return offsetof(vigil_config, gossip_t); }
// Its size before the partition field.
static size_t vg_config_size_v3(void) { return offsetof(vigil_config, partition); }
// The size of vigil_stats before its version 2 fields (no tail padding
// before them: realtime ends at an 8-byte boundary), and before its
// version 3 fields.
static size_t vg_stats_size_v1(void) { return offsetof(vigil_stats, checks); }
static size_t vg_stats_size_v2(void) { return offsetof(vigil_stats, kind_sent); }
// vigil_event.version sits in what was padding before it: the layout of
// every other field must be the one of the struct without it.
// The event kinds events.go mirrors; vigil_config without tail padding.
typedef char vg_event_kind_check[VIGIL_EVENT_EVICTED == 3 && VIGIL_EVENT_MINORITY == 4 ? 1 : -1];
typedef char vg_config_tail_check[sizeof(vigil_config) == offsetof(vigil_config, reserved0) + sizeof(int) ? 1 : -1];
typedef char vg_event_layout_check[offsetof(vigil_event, version) == 12 &&
	offsetof(vigil_event, detected_unix_ns) == 16 && sizeof(vigil_event) == 32 ? 1 : -1];
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/vigil-hpc/vigil"
	"github.com/vigil-hpc/vigil/bootstrap"
	"github.com/vigil-hpc/vigil/bootstrap/pmix"
	"github.com/vigil-hpc/vigil/daemon"
	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/settings"
	"github.com/vigil-hpc/vigil/sporadic"
	"github.com/vigil-hpc/vigil/transport"
	"github.com/vigil-hpc/vigil/transport/netaddr"
)

// Status codes (vigil.h).
const (
	vOK        = C.VIGIL_OK
	eInvalid   = C.VIGIL_ERR_INVALID
	eState     = C.VIGIL_ERR_STATE
	eBootstrap = C.VIGIL_ERR_BOOTSTRAP
	eNoPMIx    = C.VIGIL_ERR_NO_PMIX
	eTransport = C.VIGIL_ERR_TRANSPORT
	eTimeout   = C.VIGIL_ERR_TIMEOUT
	eEvicted   = C.VIGIL_ERR_EVICTED
	eCallback  = C.VIGIL_ERR_CALLBACK
	eInternal  = C.VIGIL_ERR_INTERNAL
)

const (
	modeRing     = C.VIGIL_MODE_RING
	modeSporadic = C.VIGIL_MODE_SPORADIC

	joinTimeout = 60 * time.Second
)

// instance is the process's detector, from vigil_init* to vigil_finalize.
type instance struct {
	rank         uint32
	size         int
	mode         int
	bs           bootstrap.Bootstrap
	cfg          node.Config
	udpOnly      bool                                // VIGIL_HEARTBEAT=udp: no shared-memory heartbeats
	addr         netaddr.Config                      // address settings (addr.go)
	listen       string                              // the address to listen on
	publish      func(listen string) (string, error) // the address to publish for the listener's
	startTimeout time.Duration
	log          *slog.Logger

	// rec is the record the events are read from (events.go): nrec in
	// ring mode, evl in the others.
	rec    record
	nrec   *nodeRecord
	evl    *eventLog
	pollMu sync.Mutex
	pollAt int // the next event vigil_poll returns
	cb     atomic.Pointer[callback]
	cbSet  chan struct{} // signalled (non-blocking) when the callback changes

	// Set by vigil_start before started is stored.
	started atomic.Bool
	det     *vigil.Detector  // ring mode
	nd      *node.Node       // ring mode: det.Node
	pr      *sporadic.Prober // sporadic mode
	dc      *daemon.Client   // daemon mode (daemon.go)
	// graceEnd: until then (CLOCK_MONOTONIC ns), a probe that reaches
	// nobody does not declare death: with a static address table there is
	// no fence, and peers may not be listening yet (sporadic mode).
	graceEnd int64
	quit     chan struct{}
	wg       sync.WaitGroup
	cbTid    atomic.Int64 // the callback thread's TID
}

var (
	mu  sync.Mutex // serializes init, start and the start of finalize
	cur atomic.Pointer[instance]

	errMu   sync.Mutex
	lastErr string
)

// codedError carries the status code an error maps to.
type codedError struct {
	code C.int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

func coded(code C.int, err error) error { return &codedError{code, err} }

// fail records err as the last error and returns its status code (def
// unless err carries one).
func fail(def C.int, err error) C.int {
	code := def
	var ce *codedError
	switch {
	case errors.As(err, &ce):
		code = ce.code
	case errors.Is(err, pmix.ErrNotBuilt), errors.Is(err, pmix.ErrNoLibrary):
		code = eNoPMIx
	case errors.Is(err, context.DeadlineExceeded):
		code = eTimeout
	}
	errMu.Lock()
	lastErr = "vigil: " + err.Error()
	errMu.Unlock()
	return code
}

func failf(code C.int, format string, args ...any) C.int {
	return fail(code, fmt.Errorf(format, args...))
}

// newLogger logs to stderr at the level VIGIL_LOG names (default warn).
func newLogger() (*slog.Logger, error) {
	var level slog.Level
	switch v := strings.ToLower(os.Getenv(settings.Log.Env)); v {
	case "", "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	case "info":
		level = slog.LevelInfo
	case "debug":
		level = slog.LevelDebug
	case "off":
		return slog.New(slog.DiscardHandler), nil
	default:
		return nil, fmt.Errorf("%s=%q: want error, warn, info, debug or off", settings.Log.Env, v)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("lib", "vigil"), nil
}

// envSettings reads the detector settings of vigil_init_from_env through
// the settings table (settings.ParseEnv), which names, parses and bounds
// them; the address variables are netaddr.FromEnv's, VIGIL_LOG newLogger's.
func envSettings(inst *instance) error {
	var mode, heartbeat, partition string
	for _, b := range []struct {
		s   *settings.Setting
		dst any
	}{
		{settings.H, &inst.cfg.HeartbeatPeriod}, {settings.Delta, &inst.cfg.SuspectTimeout},
		{settings.Check, &inst.cfg.CheckPeriod}, {settings.Grace, &inst.cfg.StartGrace},
		{settings.StartTimeout, &inst.startTimeout}, {settings.Mode, &mode},
		{settings.Heartbeat, &heartbeat}, {settings.RealTime, &inst.cfg.RealTime}, {settings.Partition, &partition},
		{settings.GossipStep, &inst.cfg.Gossip.Step}, {settings.GossipLatency, &inst.cfg.Gossip.Latency},
		{settings.GossipT, &inst.cfg.Gossip.T}, {settings.GossipC, &inst.cfg.Gossip.C}, {settings.GossipF, &inst.cfg.Gossip.F},
	} {
		if err := settings.ParseEnv(b.s, os.Getenv, b.dst); err != nil {
			return err
		}
	}
	inst.mode = modeRing
	if mode == "sporadic" {
		inst.mode = modeSporadic
	}
	inst.udpOnly = heartbeat == "udp"
	if partition != "" {
		m, err := detector.ParsePartitionMode(partition)
		if err != nil {
			return err
		}
		inst.cfg.Partition = m
	}
	// The broadcast is read as text: checkBroadcast names the propagations.
	inst.cfg.Broadcast = os.Getenv(settings.Broadcast.Env)
	if err := checkBroadcast(inst.cfg.Broadcast, settings.EnvNames); err != nil {
		return err
	}
	var err error
	if inst.addr, err = netaddr.FromEnv(); err != nil {
		return err
	}
	if err := inst.addr.Validate(); err != nil {
		return err
	}
	cpu := -1
	if err := settings.ParseEnv(settings.Pin, os.Getenv, &cpu); err != nil || (os.Getenv(settings.Pin.Env) != "" && cpu < 0) {
		return fmt.Errorf("%s=%q: want a CPU number", settings.Pin.Env, os.Getenv(settings.Pin.Env))
	}
	if cpu >= 0 {
		inst.cfg.PinEmitter, inst.cfg.EmitterCPU = true, cpu
	}
	// The timing's bounds now, before joining the launcher (finishInit
	// checks again with the job's size).
	c := inst.cfg
	c.Size = 1
	if err := c.Validate(); err != nil {
		if _, ok := errors.AsType[*settings.BoundError](err); ok {
			return boundError(err, settings.EnvNames)
		}
	}
	return boundError(settings.CheckBound(settings.StartTimeout, inst.startTimeout), settings.EnvNames)
}

// joinFromEnv joins the launcher this process was started by, as `vigil
// agent` does (vigil.FromEnvironment: the local launcher's variables win
// over PMIx's; PMIx without PMIx support is VIGIL_ERR_NO_PMIX, see fail).
func joinFromEnv() (bootstrap.Bootstrap, error) {
	ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
	defer cancel()
	bs, err := vigil.FromEnvironment(ctx)
	if errors.Is(err, vigil.ErrNoLauncher) {
		return nil, fmt.Errorf("%w, or initialize with vigil_init", err)
	}
	return bs, err
}

// finishInit validates the configuration, naming settings as names
// does (settings.EnvNames or settings.CNames), and installs inst.
func finishInit(inst *instance, names settings.Names) C.int {
	inst.cfg.Rank, inst.cfg.Size, inst.cfg.Logger = ranks.Rank(inst.rank), inst.size, inst.log
	if err := settings.CheckBound(settings.StartTimeout, inst.startTimeout); err != nil {
		return fail(eInvalid, boundError(err, names))
	}
	if inst.startTimeout == 0 {
		inst.startTimeout = settings.DefaultStartTimeout
	}
	if err := inst.cfg.Validate(); err != nil {
		return fail(eInvalid, boundError(err, names))
	}
	if err := inst.chooseAddr(); err != nil {
		return fail(eInvalid, err)
	}
	if inst.mode == modeRing {
		inst.nrec = &nodeRecord{self: inst.rank}
		inst.rec = inst.nrec
	} else {
		if inst.evl == nil {
			inst.evl = newEventLog()
		}
		inst.rec = inst.evl
	}
	inst.cbSet = make(chan struct{}, 1)
	inst.quit = make(chan struct{})
	cur.Store(inst)
	return vOK
}

// boundError renames a *settings.BoundError as names does; other errors pass.
func boundError(err error, names settings.Names) error {
	if be, ok := errors.AsType[*settings.BoundError](err); ok {
		return errors.New(be.In(names))
	}
	return err
}

// vigil_init_from_env initializes from the launcher's environment (vigil.h).
//
//export vigil_init_from_env
func vigil_init_from_env() C.int {
	mu.Lock()
	defer mu.Unlock()
	if cur.Load() != nil {
		return failf(eState, "vigil_init_from_env: already initialized (call vigil_finalize first)")
	}
	inst := &instance{}
	var err error
	if inst.log, err = newLogger(); err != nil {
		return fail(eInvalid, err)
	}
	if err := envSettings(inst); err != nil {
		return fail(eInvalid, err)
	}
	bs, err := joinFromEnv()
	if err != nil {
		return fail(eBootstrap, err)
	}
	inst.bs, inst.rank, inst.size = bs, bs.Rank(), bs.Size()
	if rc := finishInit(inst, settings.EnvNames); rc != vOK {
		bs.Close()
		return rc
	}
	return vOK
}

// staticIdentity is the identity part of an explicit configuration.
type staticIdentity struct {
	rank  uint32
	size  int
	jobID uint64
	key   []byte
}

func (s *staticIdentity) Rank() uint32  { return s.rank }
func (s *staticIdentity) Size() int     { return s.size }
func (s *staticIdentity) JobID() uint64 { return s.jobID }
func (s *staticIdentity) Key() []byte   { return s.key }
func (s *staticIdentity) Close() error  { return nil }

// staticBootstrap knows every address in advance (vigil_config.peers).
type staticBootstrap struct {
	staticIdentity
	peers []string
}

func (s *staticBootstrap) Exchange(context.Context, string) ([]string, error) {
	return append([]string(nil), s.peers...), nil
}

// vigil_init initializes from an explicit vigil_config (vigil.h).
//
//export vigil_init
func vigil_init(c *C.vigil_config) C.int {
	mu.Lock()
	defer mu.Unlock()
	if cur.Load() != nil {
		return failf(eState, "vigil_init: already initialized (call vigil_finalize first)")
	}
	if c == nil {
		return failf(eInvalid, "vigil_init: NULL configuration")
	}
	if c.struct_size != C.sizeof_vigil_config && c.struct_size != C.vg_config_size_v2() && c.struct_size != C.vg_config_size_v1() {
		return failf(eInvalid, "vigil_init: struct_size %d: want sizeof(vigil_config) = %d (or %d or %d, its versions 2 and 1): initialize it with vigil_config_init",
			c.struct_size, C.sizeof_vigil_config, C.vg_config_size_v2(), C.vg_config_size_v1())
	}
	id := staticIdentity{rank: uint32(c.rank), size: int(c.size), jobID: uint64(c.job_id)}
	switch {
	case id.size < 1:
		return failf(eInvalid, "%s = %d, want >= 1", settings.Size.Name(settings.CNames), id.size)
	case int(id.rank) >= id.size:
		return failf(eInvalid, "%s = %d, want < size = %d", settings.Rank.Name(settings.CNames), id.rank, id.size)
	case id.jobID == 0:
		return failf(eInvalid, "%s is 0, want the job's non-zero ID", settings.JobID.Name(settings.CNames))
	case c.key == nil:
		return failf(eInvalid, "%s is NULL: want the job's key, at least 16 bytes", settings.Key.Name(settings.CNames))
	case c.key_len < 16:
		return failf(eInvalid, "vigil_config.%s = %d: want at least 16 bytes", settings.Key.C[1], c.key_len)
	case (c.peers == nil) == (c.allgather == nil):
		return failf(eInvalid, "vigil_config: set exactly one of %s and %s", settings.Peers.CName(), settings.Allgather.CName())
	case c.mode != modeRing && c.mode != modeSporadic:
		return failf(eInvalid, "%s = %d, want VIGIL_MODE_RING or VIGIL_MODE_SPORADIC", settings.Mode.Name(settings.CNames), c.mode)
	}
	id.key = C.GoBytes(unsafe.Pointer(c.key), C.int(c.key_len))
	inst := &instance{rank: id.rank, size: id.size, mode: int(c.mode)}
	var err error
	if inst.log, err = newLogger(); err != nil {
		return fail(eInvalid, err)
	}
	if inst.addr, err = netaddr.FromEnv(); err != nil {
		return fail(eInvalid, err)
	}
	if c.listen_addr != nil {
		inst.listen = C.GoString(c.listen_addr)
		inst.addr.Bind, inst.addr.Names.Bind = inst.listen, settings.Bind.Name(settings.CNames)
	}
	if c.struct_size >= C.vg_config_size_v2() { // the address fields exist
		set := func(p *C.char, v, name *string, s *settings.Setting) {
			if p != nil {
				*v, *name = C.GoString(p), s.Name(settings.CNames)
			}
		}
		set(c.advertise_addr, &inst.addr.Advertise, &inst.addr.Names.Advertise, settings.Advertise)
		set(c.if_include, &inst.addr.Include, &inst.addr.Names.Include, settings.IfInclude)
		set(c.if_exclude, &inst.addr.Exclude, &inst.addr.Names.Exclude, settings.IfExclude)
		if err := inst.addr.Validate(); err != nil {
			return fail(eInvalid, err)
		}
	}
	if c.peers != nil {
		cp := unsafe.Slice((**C.char)(unsafe.Pointer(c.peers)), id.size)
		sb := &staticBootstrap{staticIdentity: id, peers: make([]string, id.size)}
		for r, p := range cp {
			if p == nil || *p == 0 {
				return failf(eInvalid, "%s[%d] is empty", settings.Peers.Name(settings.CNames), r)
			}
			sb.peers[r] = C.GoString(p)
		}
		if inst.listen == "" {
			inst.listen = sb.peers[id.rank]
			inst.addr.Names.Bind = fmt.Sprintf("%s[%d]", settings.Peers.Name(settings.CNames), id.rank)
		}
		inst.bs = sb
	} else {
		inst.bs = &allgatherBootstrap{staticIdentity: id, fn: c.allgather, user: c.allgather_user}
	}
	inst.cfg = node.Config{
		HeartbeatPeriod: time.Duration(c.heartbeat_ns),
		SuspectTimeout:  time.Duration(c.suspect_ns),
		CheckPeriod:     time.Duration(c.check_ns),
		StartGrace:      time.Duration(c.grace_ns),
		RealTime:        c.realtime != 0,
	}
	if c.broadcast != nil {
		inst.cfg.Broadcast = C.GoString(c.broadcast)
	}
	if c.struct_size >= C.sizeof_vigil_config { // the partition field exists
		switch c.partition {
		case C.VIGIL_PARTITION_FAILSTOP:
		case C.VIGIL_PARTITION_CONTINUE:
			inst.cfg.Partition = detector.PartitionContinue
		default:
			return failf(eInvalid, "%s = %d, want VIGIL_PARTITION_FAILSTOP or VIGIL_PARTITION_CONTINUE", settings.Partition.Name(settings.CNames), c.partition)
		}
	} else {
		inst.cfg.Partition = detector.PartitionContinue // a caller from before the field: as it was then
	}
	if c.struct_size >= C.vg_config_size_v3() { // the gossip fields exist
		inst.cfg.Gossip = node.GossipConfig{Step: time.Duration(c.gossip_step_ns), Latency: time.Duration(c.gossip_latency_ns),
			T: int(c.gossip_t), C: int(c.gossip_c), F: int(c.gossip_f)}
	}
	if err := checkBroadcast(inst.cfg.Broadcast, settings.CNames); err != nil {
		return fail(eInvalid, err)
	}
	if c.pin_cpu >= 0 {
		inst.cfg.PinEmitter, inst.cfg.EmitterCPU = true, int(c.pin_cpu)
	}
	inst.startTimeout = time.Duration(c.start_timeout_ms) * time.Millisecond
	return finishInit(inst, settings.CNames)
}

// get returns the current instance, or fails with VIGIL_ERR_STATE.
func get(fn string, mustStart bool) (*instance, C.int) {
	inst := cur.Load()
	if inst == nil {
		return nil, failf(eState, "%s: not initialized (call vigil_init or vigil_init_from_env)", fn)
	}
	if mustStart && !inst.started.Load() {
		return nil, failf(eState, "%s: not started (call vigil_start)", fn)
	}
	return inst, vOK
}

// vigil_rank returns this process's rank (vigil.h).
//
//export vigil_rank
func vigil_rank() C.int {
	inst, rc := get("vigil_rank", false)
	if inst == nil {
		return rc
	}
	return C.int(inst.rank)
}

// vigil_size returns the job size (vigil.h).
//
//export vigil_size
func vigil_size() C.int {
	inst, rc := get("vigil_size", false)
	if inst == nil {
		return rc
	}
	return C.int(inst.size)
}

// vigil_start opens the transport, exchanges addresses and starts the detector (vigil.h).
//
//export vigil_start
func vigil_start() C.int {
	mu.Lock()
	defer mu.Unlock()
	inst, rc := get("vigil_start", false)
	if inst == nil {
		return rc
	}
	if inst.started.Load() {
		return failf(eState, "vigil_start: already started")
	}
	if ag, ok := inst.bs.(*allgatherBootstrap); ok && ag.nodes == nil {
		// Every rank's host first, through the application's allgather, so
		// that a job spanning hosts never publishes loopback.
		if err := ag.gatherNodes(); err != nil {
			return fail(eBootstrap, fmt.Errorf("vigil_start: learning the ranks' hosts: %w", err))
		}
		if inst.mode == modeSporadic { // its address was chosen at vigil_init, without the hosts
			if err := inst.chooseAddr(); err != nil {
				inst.exchangeAnyway(context.Background())
				return fail(eTransport, err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), inst.startTimeout)
	defer cancel()
	exchange := func(listen string) ([]string, error) {
		addr, err := inst.publish(listen)
		if err != nil {
			return nil, coded(eTransport, err)
		}
		addrs, err := inst.bs.Exchange(ctx, addr)
		if err != nil {
			return nil, coded(eBootstrap, fmt.Errorf("address exchange: %w", err))
		}
		if len(addrs) != inst.size {
			return nil, coded(eBootstrap, fmt.Errorf("address exchange gave %d addresses for %d ranks", len(addrs), inst.size))
		}
		return addrs, nil
	}
	switch inst.mode {
	case modeRing:
		det, err := vigil.Join(ctx, inst.joinConfig())
		if err != nil {
			code := joinCode(err)
			return fail(code, coded(code, err)) // coded: a time-out of the exchange stays eBootstrap
		}
		inst.det, inst.nd = det, det.Node
		inst.nrec.nd.Store(det.Node)
	case modeSporadic:
		pr, err := sporadic.Listen(inst.listen, inst.rank, inst.bs.JobID(), inst.bs.Key())
		if err != nil {
			inst.exchangeAnyway(ctx)
			return fail(eTransport, err)
		}
		peers, err := exchange(pr.Addr())
		if err != nil {
			pr.Close()
			return fail(eBootstrap, err)
		}
		pr.SetPeers(peers)
		inst.pr = pr
		if _, static := inst.bs.(*staticBootstrap); static {
			grace := inst.cfg.WithDefaults().StartGrace
			inst.graceEnd = node.Mono() + int64(grace)
		}
	}
	inst.wg.Add(1)
	go inst.dispatch()
	inst.started.Store(true)
	return vOK
}

// joinConfig is the ring mode's vigil.Join configuration: TCP, with
// shared-memory heartbeats unless VIGIL_HEARTBEAT=udp, through inst.bs
// (which inst keeps and closes). The host of every rank, for host-aware
// block mending, is the bootstrap's: with an allgather the hosts
// vigil_start gathered, from the environment the launcher's (PMIx's nodes,
// the local launcher's pretended hosts). With vigil_config.peers the rank
// listens on listen_addr or its own entry, and the environment's address
// settings do not apply.
func (inst *instance) joinConfig() vigil.Config {
	cfg := vigil.Config{Config: inst.cfg, Bootstrap: inst.bs, Transport: "tcp", Heartbeat: "shm", Addresses: inst.addr}
	if cfg.Hosts == nil {
		cfg.Hosts = bootstrap.Hosts(inst.bs)
	}
	if inst.udpOnly {
		cfg.Heartbeat = "udp"
	}
	if _, static := inst.bs.(*staticBootstrap); static {
		cfg.Addresses = staticAddresses(inst.listen, inst.addr.Names.Bind)
	}
	return cfg
}

// joinCode is the status code of a vigil.Join failure.
func joinCode(err error) C.int {
	switch {
	case errors.Is(err, vigil.ErrBootstrap):
		return eBootstrap
	case errors.Is(err, vigil.ErrTransport):
		return eTransport
	}
	return eInternal
}

// exchangeAnyway takes part in a collective exchange (an allgather) with
// an empty address after a local failure, so that the other ranks fail
// instead of waiting for this one forever.
func (inst *instance) exchangeAnyway(ctx context.Context) {
	if ag, ok := inst.bs.(*allgatherBootstrap); ok {
		ag.Exchange(ctx, "")
	}
}

// dispatch runs the failure callback on its own locked OS thread, reading
// the record in place (in ring mode the node's, woken by its Changed
// channel); it logs this rank's stop once, and in daemon mode the end of
// the daemon's connection.
func (inst *instance) dispatch() {
	defer inst.wg.Done()
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	inst.cbTid.Store(int64(syscall.Gettid()))
	cev := (*C.vigil_event)(C.malloc(C.sizeof_vigil_event))
	defer C.free(unsafe.Pointer(cev))
	next, stopLogged := 0, false
	var ended <-chan daemon.Event // daemon mode: closed when the daemon's connection ends
	if inst.dc != nil {
		ended = inst.dc.Events()
	}
	for {
		changed := inst.rec.changed() // before reading: a change after it closes or signals it
		if !stopLogged && inst.nrec != nil {
			stopLogged = inst.logStop()
		}
		for cb := inst.cb.Load(); cb != nil; cb = inst.cb.Load() {
			e, ok := inst.rec.at(next)
			if !ok {
				break
			}
			next++
			*cev = e.c()
			cb.call(cev)
		}
		select {
		case <-changed:
		case <-inst.cbSet:
		case _, ok := <-ended:
			if !ok {
				ended = nil
				if !inst.closing() && !inst.dc.Closed() {
					inst.log.Warn("the node's daemon closed the connection: no more failure reports", "rank", inst.rank)
				}
			}
		case <-inst.quit:
			return
		}
	}
}

// logStop logs this rank's stop (ring mode), if the node stopped, and
// reports whether it did.
func (inst *instance) logStop() bool {
	rec := inst.nrec.latest()
	if rec == nil {
		return false
	}
	stopped, minority, _, _ := rec.Stopped()
	switch {
	case !stopped:
		return false
	case minority:
		inst.log.Warn("this rank stopped: minority partition (it holds most of the job dead)", "rank", inst.rank)
	default:
		inst.log.Warn("this rank was declared dead by the job (paused or cut off longer than delta)", "rank", inst.rank)
	}
	return true
}

// vigil_set_failure_callback sets or clears the failure callback (vigil.h).
//
//export vigil_set_failure_callback
func vigil_set_failure_callback(fn C.vigil_failure_fn, user unsafe.Pointer) C.int {
	inst, rc := get("vigil_set_failure_callback", false)
	if inst == nil {
		return rc
	}
	if fn == nil {
		inst.cb.Store(nil)
	} else {
		inst.cb.Store(&callback{fn: fn, user: user})
	}
	select {
	case inst.cbSet <- struct{}{}:
	default:
	}
	return vOK
}

// vigil_poll returns the next event not yet polled, without blocking (vigil.h).
//
//export vigil_poll
func vigil_poll(ev *C.vigil_event) C.int {
	inst, rc := get("vigil_poll", false)
	if inst == nil {
		return rc
	}
	if ev == nil {
		return failf(eInvalid, "vigil_poll: NULL event")
	}
	inst.pollMu.Lock()
	e, ok := inst.rec.at(inst.pollAt)
	if ok {
		inst.pollAt++
	}
	inst.pollMu.Unlock()
	if !ok {
		return 0
	}
	*ev = e.c()
	return 1
}

// vigil_dead_set copies the dead or departed ranks (vigil.h).
//
//export vigil_dead_set
func vigil_dead_set(buf *C.uint32_t, n C.size_t) C.long {
	inst, rc := get("vigil_dead_set", false)
	if inst == nil {
		return C.long(rc)
	}
	if buf == nil && n > 0 {
		return C.long(failf(eInvalid, "vigil_dead_set: NULL buffer of length %d", n))
	}
	var out []uint32
	if n > 0 {
		out = unsafe.Slice((*uint32)(unsafe.Pointer(buf)), int(n))
	}
	return C.long(inst.rec.copyDead(out))
}

// vigil_stats_get fills the counters since vigil_start (vigil.h).
//
//export vigil_stats_get
func vigil_stats_get(st *C.vigil_stats) C.int {
	inst, rc := get("vigil_stats_get", false)
	if inst == nil {
		return rc
	}
	if st == nil || (st.struct_size != C.sizeof_vigil_stats && st.struct_size != C.vg_stats_size_v1() &&
		st.struct_size != C.vg_stats_size_v2()) {
		return failf(eInvalid, "vigil_stats_get: NULL or struct_size not sizeof(vigil_stats) (%d, or %d for version 1, %d for version 2)",
			C.sizeof_vigil_stats, C.vg_stats_size_v1(), C.vg_stats_size_v2())
	}
	size := st.struct_size
	full := C.vigil_stats{struct_size: size, dead: C.uint32_t(inst.rec.copyDead(nil))}
	if inst.started.Load() && inst.nd != nil {
		fillStats(&full, inst.nd.Stats())
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(st)), size), unsafe.Slice((*byte)(unsafe.Pointer(&full)), size))
	return vOK
}

// fillStats copies the node's counters into st (every version's fields).
func fillStats(st *C.vigil_stats, ns node.Stats) {
	var rejected uint64
	for _, v := range ns.Transport.Rejected {
		rejected += v
	}
	st.heartbeats_sent = C.uint64_t(ns.Emitter.Sent)
	st.heartbeats_missed = C.uint64_t(ns.Emitter.Missed)
	st.max_late_ns = C.int64_t(ns.Emitter.MaxLateNs)
	st.msgs_sent, st.msgs_recv = C.uint64_t(ns.Transport.MsgsSent), C.uint64_t(ns.Transport.MsgsRecv)
	st.msgs_dropped, st.rejected = C.uint64_t(ns.Transport.MsgsDropped), C.uint64_t(rejected)
	st.bcasts_started, st.bcasts_forwarded = C.uint64_t(ns.BcastsStarted), C.uint64_t(ns.BcastsForwarded)
	st.bad_messages, st.loop_wakes = C.uint64_t(ns.BadMessages), C.uint64_t(ns.LoopWakes)
	if ns.Emitter.RealTime {
		st.realtime = 1
	}
	st.checks, st.heartbeats_dropped = C.uint64_t(ns.Emitter.Checks), C.uint64_t(ns.Transport.HeartbeatsDropped)
	st.bytes_sent, st.bytes_recv = C.uint64_t(ns.Transport.BytesSent), C.uint64_t(ns.Transport.BytesRecv)
	st.reported, st.deaths_learned, st.departures = C.uint64_t(ns.Reported), C.uint64_t(ns.DeathsLearned), C.uint64_t(ns.Departures)
	st.agreements_decided, st.agree_returned = C.uint64_t(ns.AgreementsDecided), C.uint64_t(ns.AgreeReturned)
	st.agree_latency_ns, st.agree_max_latency_ns = C.uint64_t(ns.AgreeLatencyNs), C.int64_t(ns.AgreeMaxLatencyNs)
	for k, ks := range ns.ByKind { // node.MsgKinds is the order of VIGIL_MSG_* (TestStatsNames)
		st.kind_sent[k], st.kind_recv[k] = C.uint64_t(ks.Sent), C.uint64_t(ks.Recv)
		st.kind_bytes_sent[k], st.kind_bytes_recv[k] = C.uint64_t(ks.BytesSent), C.uint64_t(ks.BytesRecv)
	}
	for reason, v := range ns.Transport.Rejected {
		st.rejected_by[rejectIndex(reason)] += C.uint64_t(v)
	}
}

// rejectSlots maps the rejection reasons vigil.h names to their index
// in vigil_stats.rejected_by (from the header's own table).
var rejectSlots = func() map[string]int {
	m := map[string]int{}
	for i := range C.VIGIL_REJECT_SLOTS {
		if name := C.vigil_reject_name(C.int(i)); name != nil {
			m[C.GoString(name)] = i
		}
	}
	return m
}()

// rejectIndex returns the index of reason in vigil_stats.rejected_by:
// VIGIL_REJECT_OTHER for a reason the header does not name.
func rejectIndex(reason string) int {
	if i, ok := rejectSlots[reason]; ok {
		return i
	}
	return C.VIGIL_REJECT_OTHER
}

// msgKindName is vigil_msg_kind_name: the header's name of message kind
// k, or "" for a slot it does not name.
func msgKindName(k int) string {
	if name := C.vigil_msg_kind_name(C.int(k)); name != nil {
		return C.GoString(name)
	}
	return ""
}

// numMsgKindSlots is VIGIL_MSG_KIND_SLOTS.
const numMsgKindSlots = C.VIGIL_MSG_KIND_SLOTS

// vigil_is_dead reports whether a rank is known gone (vigil.h).
//
//export vigil_is_dead
func vigil_is_dead(r C.uint32_t) C.int {
	inst, rc := get("vigil_is_dead", false)
	if inst == nil {
		return rc
	}
	if int(r) >= inst.size {
		return failf(eInvalid, "vigil_is_dead: rank %d out of range (size %d)", r, inst.size)
	}
	if inst.rec.isDead(uint32(r)) {
		return 1
	}
	return 0
}

// vigil_probe checks a rank with a ping-pong, in sporadic mode (vigil.h).
//
//export vigil_probe
func vigil_probe(r C.uint32_t, timeoutNs C.int64_t) C.int {
	inst, rc := get("vigil_probe", true)
	if inst == nil {
		return rc
	}
	switch {
	case inst.mode != modeSporadic:
		return failf(eState, "vigil_probe: only in sporadic mode (ring mode detects by itself: use vigil_is_dead)")
	case int(r) >= inst.size:
		return failf(eInvalid, "vigil_probe: rank %d out of range (size %d)", r, inst.size)
	case timeoutNs <= 0:
		return failf(eInvalid, "vigil_probe: timeout %d ns, want > 0", timeoutNs)
	case uint32(r) == inst.rank:
		return 0
	case inst.rec.isDead(uint32(r)):
		return 1
	}
	select {
	case <-inst.quit:
		return failf(eState, "vigil_probe: finalized")
	default:
	}
	err := inst.pr.Probe(uint32(r), time.Duration(timeoutNs))
	if err == nil {
		return 0
	}
	if node.Mono() < inst.graceEnd {
		inst.log.Info("probe failed during the start-up grace: not declared dead", "rank", uint32(r), "err", err)
		return 0
	}
	inst.log.Info("probe failed: rank declared dead", "rank", uint32(r), "err", err)
	inst.evl.add(event{kind: eventFailed, rank: uint32(r), detector: inst.rank,
		detectedUnix: time.Now().UnixNano(), deliveredMono: node.Mono()})
	return 1
}

// vigil_leave departs cleanly (vigil.h).
//
//export vigil_leave
func vigil_leave(timeoutMs C.int) C.int {
	inst, rc := get("vigil_leave", true)
	if inst == nil {
		return rc
	}
	if timeoutMs < 0 {
		return failf(eInvalid, "vigil_leave: timeout %d ms, want >= 0", timeoutMs)
	}
	if inst.mode == modeSporadic {
		inst.pr.Close() // probes of this rank now find nobody
		return vOK
	}
	if inst.mode == modeDaemon {
		return inst.leaveDaemon()
	}
	select {
	case <-inst.nd.Evicted():
		return failf(eEvicted, "vigil_leave: this rank was already declared dead by the job")
	default:
	}
	timeout := time.Duration(timeoutMs) * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := inst.nd.Leave(ctx, min(100*time.Millisecond, timeout)); err != nil {
		if errors.Is(err, transport.ErrClosed) {
			return fail(eState, fmt.Errorf("vigil_leave: %w", err))
		}
		return fail(eTransport, fmt.Errorf("vigil_leave: %w", err))
	}
	return vOK
}

// vigil_finalize stops the detector and releases the bootstrap (vigil.h).
//
//export vigil_finalize
func vigil_finalize() C.int {
	if inst := cur.Load(); inst != nil && inst.cbTid.Load() == int64(syscall.Gettid()) {
		return failf(eCallback, "vigil_finalize: called from the failure callback")
	}
	mu.Lock()
	inst := cur.Swap(nil)
	mu.Unlock()
	if inst == nil {
		return failf(eState, "vigil_finalize: not initialized")
	}
	close(inst.quit)
	if inst.started.Load() {
		if inst.det != nil {
			inst.det.Close()
		}
		if inst.pr != nil {
			inst.pr.Close()
		}
	}
	if inst.dc != nil {
		inst.dc.Close(false)
	}
	inst.wg.Wait()
	if err := inst.bs.Close(); err != nil {
		return fail(eBootstrap, err)
	}
	return vOK
}

var (
	strerrors     = map[C.int]*C.char{}
	strerrUnknown *C.char
	strerrorsOnce sync.Once
)

// vigil_strerror returns a static description of a status code (vigil.h).
//
//export vigil_strerror
func vigil_strerror(code C.int) *C.char {
	strerrorsOnce.Do(func() {
		for c, s := range map[C.int]string{
			vOK:        "success",
			eInvalid:   "invalid argument or configuration",
			eState:     "call out of order (not initialized, not started, already started, or wrong mode)",
			eBootstrap: "launcher bootstrap or address exchange failed",
			eNoPMIx:    "started by PMIx, but the PMIx library cannot be loaded (libpmix2)",
			eTransport: "transport failure (listen, connect or send)",
			eTimeout:   "timed out",
			eEvicted:   "this process was declared dead by the job",
			eCallback:  "not allowed from the failure callback",
			eInternal:  "internal error",
		} {
			strerrors[c] = C.CString(s) // never freed: static for the caller
		}
		strerrUnknown = C.CString("unknown status code")
	})
	if s, ok := strerrors[code]; ok {
		return s
	}
	return strerrUnknown
}

// vigil_last_error copies the latest failure's message (vigil.h).
//
//export vigil_last_error
func vigil_last_error(buf *C.char, n C.size_t) C.size_t {
	errMu.Lock()
	s := lastErr
	errMu.Unlock()
	if buf != nil && n > 0 {
		out := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
		k := copy(out[:n-1], s)
		out[k] = 0
	}
	return C.size_t(len(s))
}
