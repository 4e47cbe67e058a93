package settings

import (
	"fmt"
	"math"
	"time"
)

// Defaults that the Go configurations apply to an unset field.
const (
	DefaultHeartbeatPeriod = 10 * time.Millisecond
	DefaultStartGrace      = 2 * time.Second
	DefaultAgreeResend     = 250 * time.Millisecond
	DefaultMendProbe       = 16
	DefaultGossipStep      = time.Millisecond
	DefaultGossipLatency   = 2 * time.Millisecond
	DefaultStartTimeout    = 60 * time.Second
	// DefaultBroadcast is the agents' propagation, DefaultDaemonBroadcast
	// the daemons' (daemon.Config.Broadcast).
	DefaultBroadcast       = "hba"
	DefaultDaemonBroadcast = "bmg"
	// DefaultDaemonHeartbeatPeriod and DefaultDaemonSuspectTimeout are
	// `vigil daemon`'s -h and -delta.
	DefaultDaemonHeartbeatPeriod = 20 * time.Millisecond
	DefaultDaemonSuspectTimeout  = 200 * time.Millisecond
)

// Environment variables that other packages name as constants.
const (
	RankEnv         = "VIGIL_RANK"
	SizeEnv         = "VIGIL_SIZE"
	JobIDEnv        = "VIGIL_JOBID"
	KeyEnv          = "VIGIL_KEY"
	BootstrapEnv    = "VIGIL_BOOTSTRAP"
	RanksPerHostEnv = "VIGIL_RANKS_PER_HOST"
	BindEnv         = "VIGIL_BIND"
	ListenEnv       = "VIGIL_LISTEN"
	AdvertiseEnv    = "VIGIL_ADVERTISE"
	IfIncludeEnv    = "VIGIL_IF_INCLUDE"
	IfExcludeEnv    = "VIGIL_IF_EXCLUDE"
	LibPMIxEnv      = "VIGIL_LIBPMIX"
	DaemonSocketEnv = "VIGIL_DAEMON_SOCK"
	VerbsDeviceEnv  = "VIGIL_VERBS_DEVICE"
	VerbsNetdevEnv  = "VIGIL_VERBS_NETDEV"
)

// Broadcasts lists the propagations (node.Config.Broadcast).
var Broadcasts = []string{"hba", "bmg", "ocg", "ccg", "fcg", "ctree"}

// The commands of the vigil command that define flags.
var (
	agents    = []string{"run", "agent", "demo"}
	agentsAnd = []string{"run", "agent", "demo", "daemon"}
	tcpCmds   = []string{"run", "agent", "daemon"}
)

// Docs shared by rows.
const (
	broadcastDoc = "propagation: hba (double hypercube, seed 000), bmg (binomial graph, seed 003), or a corrected gossip of seed 002: ocg, ccg, fcg, or ctree (greedy LogP tree + FCG's correction); see -gossip-*"
	metricsDoc   = "serve Prometheus metrics of the detector over HTTP at host:port/metrics (no host, as in :9464: loopback only; 0.0.0.0: every interface, with a warning; port 0: a free port, printed in the ready line; at most 32 connections, idle ones closed after 5s; default: no endpoint)"
	perHostDoc   = "pretend the ranks are placed this many per host (rank r on host r/k)"
)

// The timing settings, which Validate and the bound errors name.
var (
	H = &Setting{Key: "h", Title: "h, heartbeat period", Kind: Duration,
		Doc: "heartbeat period h: 10µs to 1 minute (at least 50µs with -realtime)",
		Go:  []string{"node.Config.HeartbeatPeriod"}, Flag: "h", Commands: agents, FlagDefault: DefaultHeartbeatPeriod.String(),
		Env: "VIGIL_H", EnvFor: EnvLib, C: []string{"heartbeat_ns"}, CUnit: "ns",
		Min: MinHeartbeatPeriod, Max: MaxHeartbeatPeriod, Default: DefaultHeartbeatPeriod.String(),
		Rule: fmt.Sprintf("≥ %v when the heartbeat thread is real-time", RealTimeMinPeriod)}
	Delta = &Setting{Key: "delta", Title: "δ, suspicion time-out", Kind: Duration,
		Doc: "suspicion time-out δ: at least twice -h and 100µs, at most 1 hour",
		Go:  []string{"node.Config.SuspectTimeout"}, Flag: "delta", Commands: agents, FlagDefault: (5 * DefaultHeartbeatPeriod).String(),
		Env: "VIGIL_DELTA", EnvFor: EnvLib, C: []string{"suspect_ns"}, CUnit: "ns",
		Min: MinSuspectTimeout, Max: MaxSuspectTimeout, Default: "max(5 × h, 100µs) (PMPI library: 200ms)", Rule: "≥ 2 × h"}
	Check = &Setting{Key: "check", Title: "observer check period", Kind: Duration,
		Doc: "observer check period, run on the heartbeat thread, 10µs to δ (default max(δ/8, h))",
		Go:  []string{"node.Config.CheckPeriod"}, Flag: "check", Commands: agents, FlagDefault: "0s",
		Env: "VIGIL_CHECK", EnvFor: EnvLib, C: []string{"check_ns"}, CUnit: "ns",
		Min: MinHeartbeatPeriod, Max: MaxSuspectTimeout, Default: "max(δ/8, h)", Rule: "≤ δ"}
	Grace = &Setting{Key: "grace", Title: "start-up grace", Kind: Duration,
		Doc: "start-up grace before the first suspicion, up to 2 hours (default 2s + δ)",
		Go:  []string{"node.Config.StartGrace"}, Flag: "grace", Commands: agents, FlagDefault: "0s",
		Env: "VIGIL_GRACE", EnvFor: EnvLib, C: []string{"grace_ns"}, CUnit: "ns",
		Min: 0, Max: MaxStartGrace, Default: "2s + δ"}
	// RealTime has no bounds, but h has a floor with it.
	RealTime = &Setting{Key: "realtime", Title: "real-time heartbeat thread", Kind: Bool,
		Doc: "ask for SCHED_FIFO for the heartbeat thread (ignored without privilege)",
		Go:  []string{"node.Config.RealTime"}, Flag: "realtime", Commands: agentsAnd, FlagDefault: "true",
		Env: "VIGIL_REALTIME", EnvFor: EnvLib, C: []string{"realtime"},
		Default: "off (the vigil command: on)"}
	// StartTimeout bounds the C library's vigil_start exchange.
	StartTimeout = &Setting{Key: "start-timeout", Title: "start time-out (C library)", Kind: Duration,
		Doc: "bound on vigil_start's address exchange",
		Env: "VIGIL_START_TIMEOUT", EnvFor: EnvLib, C: []string{"start_timeout_ms"}, CUnit: "ms",
		Min: 0, Max: MaxStartTimeout, Default: "60s"}
	// RunFor is `vigil run -t`: how long the job runs.
	RunFor = &Setting{Key: "t", Title: "job duration (`vigil run`)", Kind: Duration,
		Doc:  "stop the job after this long, as SIGTERM would (0: until interrupted)",
		Flag: "t", Commands: []string{"run"}, FlagDefault: "0s",
		Min: 0, Max: math.MaxInt64, Default: "until interrupted"}
)

// The other settings that code names.
var (
	Rank = &Setting{Key: "rank", Title: "this process's rank", Kind: Int,
		Doc: "this process's rank in the job, 0 to size − 1",
		Go:  []string{"node.Config.Rank"}, Env: RankEnv, EnvFor: EnvLauncher, C: []string{"rank"},
		Default: "from the bootstrap"}
	Size = &Setting{Key: "size", Title: "number of ranks", Kind: Int,
		Doc: "the number of ranks of the job, ≥ 1",
		Go:  []string{"node.Config.Size"}, Env: SizeEnv, EnvFor: EnvLauncher, C: []string{"size"},
		Default: "from the bootstrap"}
	JobID = &Setting{Key: "job-id", Title: "job ID", Kind: Int,
		Doc: "with -peers, the job ID shared by the daemons (default: derived from the key, so that jobs with different keys never share one)",
		Go:  []string{"daemon.Config.JobID"}, Flag: "job-id", Commands: []string{"daemon"}, FlagDefault: "0",
		Env: JobIDEnv, EnvFor: EnvLauncher, C: []string{"job_id"},
		Default: "from the bootstrap (`vigil daemon -peers`: derived from the key)", Rule: "non-zero, the same on every rank"}
	Key = &Setting{Key: "key", Title: "job key", Kind: String,
		Doc: "the job's shared secret authenticating every message: at least 16 bytes (hex in the variable), the same on every rank",
		Env: KeyEnv, EnvFor: EnvLauncher, C: []string{"key", "key_len"},
		Default: "from the bootstrap", Rule: "≥ 16 bytes"}
	Peers = &Setting{Key: "peers", Title: "explicit addresses", Kind: String,
		Doc: "comma-separated ip:port of every daemon, in node order (default: one daemon per rank of the launcher's job, addresses exchanged through PMIx or vigil run)",
		Go:  []string{"daemon.Config.Peers"}, Flag: "peers", Commands: []string{"daemon"}, FlagDefault: "",
		C: []string{"peers"}, Default: "exchanged through the bootstrap", Rule: "vigil_config: exactly one of peers and allgather"}
	Allgather = &Setting{Key: "allgather", Title: "address exchange function", Kind: Value,
		Doc: "an allgather that exchanges every rank's host and address (such as MPI_Allgather), called by vigil_start three times in the ring mode (hosts, addresses, the start fence) and twice in the sporadic mode",
		Go:  []string{"daemon.Config.Exchange"}, C: []string{"allgather", "allgather_user"},
		Default: "none", Rule: "vigil_config: exactly one of peers and allgather"}
	Mode = &Setting{Key: "mode", Title: "detector mode (C library)", Kind: Choice, Choices: []string{"ring", "sporadic"},
		Doc: "ring: the observation ring, every rank heartbeats its observer; sporadic: no heartbeats, a rank checks a peer when asked (vigil_probe)",
		Env: "VIGIL_MODE", EnvFor: EnvLib, C: []string{"mode"}, Default: "ring (VIGIL_MODE_RING)"}
	Broadcast = &Setting{Key: "broadcast", Title: "propagation of failure news", Kind: Choice, Choices: Broadcasts,
		Doc: broadcastDoc,
		Go:  []string{"node.Config.Broadcast"}, Flag: "broadcast", Commands: agents, FlagDefault: DefaultBroadcast,
		Env: "VIGIL_BROADCAST", EnvFor: EnvLib, C: []string{"broadcast"},
		Default: DefaultBroadcast, Rule: "the same on every rank"}
	GossipStep = &Setting{Key: "gossip-step", Title: "o, corrected gossips' step", Kind: Duration,
		Doc: "corrected gossips: o, one step (a rank sends at most one gossip and one correction message per step); keep it above the per-message CPU cost times the ranks per core, or a broadcast overloads the host",
		Go:  []string{"node.Config.Gossip.Step"}, Flag: "gossip-step", Commands: agentsAnd, FlagDefault: DefaultGossipStep.String(),
		Env: "VIGIL_GOSSIP_STEP", EnvFor: EnvLib, C: []string{"gossip_step_ns"}, CUnit: "ns",
		Default: DefaultGossipStep.String(), Rule: "> 0; at most 65536 steps in L"}
	GossipLatency = &Setting{Key: "gossip-latency", Title: "L, corrected gossips' latency", Kind: Duration,
		Doc: "corrected gossips: L, the expected one-way message latency (a message counts as arriving ⌈L/o⌉+1 steps after it was sent)",
		Go:  []string{"node.Config.Gossip.Latency"}, Flag: "gossip-latency", Commands: agentsAnd, FlagDefault: DefaultGossipLatency.String(),
		Env: "VIGIL_GOSSIP_LATENCY", EnvFor: EnvLib, C: []string{"gossip_latency_ns"}, CUnit: "ns",
		Default: DefaultGossipLatency.String(), Rule: "≥ 0"}
	GossipT = &Setting{Key: "gossip-t", Title: "T, corrected gossips' end", Kind: Int,
		Doc: "corrected gossips: the gossip (or tree) phase ends at step T (0: seed 002's equations (3)-(5), or the tree's span)",
		Go:  []string{"node.Config.Gossip.T"}, Flag: "gossip-t", Commands: agentsAnd, FlagDefault: "0",
		Env: "VIGIL_GOSSIP_T", EnvFor: EnvLib, C: []string{"gossip_t"}, Default: "planned", Rule: "0 to 1048576 (bcast.MaxT)"}
	GossipC = &Setting{Key: "gossip-c", Title: "C, OCG's corrections", Kind: Int,
		Doc: "ocg: correction messages per gossip-reached rank (0: seed 002's equation (3))",
		Go:  []string{"node.Config.Gossip.C"}, Flag: "gossip-c", Commands: agentsAnd, FlagDefault: "0",
		Env: "VIGIL_GOSSIP_C", EnvFor: EnvLib, C: []string{"gossip_c"}, Default: "planned", Rule: "0 to 1048576 (bcast.MaxT)"}
	GossipF = &Setting{Key: "gossip-f", Title: "F, failures the correction tolerates", Kind: Int,
		Doc: "fcg, ctree: failures tolerated during the correction, 1 to 3",
		Go:  []string{"node.Config.Gossip.F"}, Flag: "gossip-f", Commands: agentsAnd, FlagDefault: "1",
		Env: "VIGIL_GOSSIP_F", EnvFor: EnvLib, C: []string{"gossip_f"}, Default: "1", Rule: "1 to 3 (bcast.MaxF)"}
	Emitter = &Setting{Key: "emitter", Title: "heartbeat thread in C or Go", Kind: Choice, Choices: []string{"native", "go"},
		Doc: "heartbeat thread: native (in C, outside the Go runtime, over shared memory and UDP; in Go over verbs) or go (always in Go, for comparisons)",
		Go:  []string{"node.Config.GoEmitter"}, Flag: "emitter", Commands: agents, FlagDefault: "native", Default: "native"}
	Transport = &Setting{Key: "transport", Title: "transport", Kind: Choice, Choices: []string{"tcp", "verbs"},
		Doc: "transport: tcp, or verbs (RDMA; falls back to tcp when unavailable)",
		Go:  []string{"vigil.Config.Transport"}, Flag: "transport", Commands: agents, FlagDefault: "tcp", Default: "tcp"}
	Heartbeat = &Setting{Key: "heartbeat", Title: "heartbeat path (tcp)", Kind: Choice, Choices: []string{"shm", "udp"},
		Doc: "heartbeat path with -transport tcp: shm (a store into the observer's shared memory for ranks on this host, UDP to other hosts) or udp (UDP datagrams only)",
		Go:  []string{"vigil.Config.Heartbeat"}, Flag: "heartbeat", Commands: agents, FlagDefault: "shm",
		Env: "VIGIL_HEARTBEAT", EnvFor: EnvLib, Default: "shm"}
	Pin = &Setting{Key: "pin", Title: "heartbeat thread's CPU", Kind: Int,
		Doc:  "pin the heartbeat thread to this CPU (-1: not pinned)",
		Go:   []string{"node.Config.PinEmitter", "node.Config.EmitterCPU"},
		Flag: "pin", Commands: agentsAnd, FlagDefault: "-1",
		Env: "VIGIL_PIN_CPU", EnvFor: EnvLib, C: []string{"pin_cpu"}, Default: "not pinned (C: -1, set by vigil_config_init)", Rule: "a CPU of this machine"}
	Partition = &Setting{Key: "partition", Title: "minority partition mode", Kind: Choice, Choices: []string{"failstop", "continue"},
		Doc: "the `mode` of a rank that holds most of the job dead (the minority side of a partition, or the job lost most ranks at once): failstop, the default (it stops at once: the agent prints an evicted line with reason \"minority partition\" and exits with status 3; an even split goes to the side holding the lowest rank), or continue (it goes on, as before; docs/partitions.md)",
		Go:  []string{"node.Config.Partition"}, Flag: "partition", Commands: agents, FlagDefault: "failstop",
		Env: "VIGIL_PARTITION", EnvFor: EnvLib, C: []string{"partition"},
		Default: "failstop (VIGIL_PARTITION_FAILSTOP; `vigil demo`: continue)"}
	Log = &Setting{Key: "log-level", Title: "log level", Kind: Choice, Choices: []string{"debug", "info", "warn", "error"},
		Doc: "stderr log level: debug, info, warn or error",
		Go:  []string{"node.Config.Logger"}, Flag: "log-level", Commands: agentsAnd, FlagDefault: "warn",
		Env: "VIGIL_LOG", EnvFor: EnvLib, Default: "Go: discarded; vigil and libvigil: warn, to stderr", Rule: "VIGIL_LOG also takes off"}
	Bind = &Setting{Key: "bind", Title: "address to listen on", Kind: String,
		Doc: "address to listen on: ip, ip:port or :port (default: the published address)",
		Go:  []string{"vigil.Config.Addresses.Bind"}, Flag: "bind", Commands: tcpCmds, FlagDefault: "",
		Env: BindEnv, EnvFor: EnvLib, C: []string{"listen_addr"}, Default: "the published address (vigil_config.peers: peers[rank])"}
	Listen = &Setting{Key: "listen", Title: "address to listen on (older name)", Kind: String,
		Doc: "listen address (default this node's entry of -peers; the same as -bind)",
		Go:  []string{"daemon.Config.Listen"}, Flag: "listen", Commands: []string{"daemon"}, FlagDefault: "",
		Env: ListenEnv, EnvFor: EnvLib, Default: "as bind", Rule: "set it or bind, not both to different values"}
	Advertise = &Setting{Key: "advertise", Title: "address published", Kind: String,
		Doc: "address published to the other ranks: ip or ip:port (default: chosen from the interfaces: loopback when the job runs on one host)",
		Go:  []string{"vigil.Config.Addresses.Advertise"}, Flag: "advertise", Commands: tcpCmds, FlagDefault: "",
		Env: AdvertiseEnv, EnvFor: EnvLib, C: []string{"advertise_addr"}, Default: "chosen (transport/netaddr)"}
	IfInclude = &Setting{Key: "if-include", Title: "interfaces to publish from", Kind: String,
		Doc: "interfaces and subnets to choose the published address from, such as ib0,10.1.0.0/16 (like Open MPI's oob_tcp_if_include)",
		Go:  []string{"vigil.Config.Addresses.Include"}, Flag: "if-include", Commands: tcpCmds, FlagDefault: "",
		Env: IfIncludeEnv, EnvFor: EnvLib, C: []string{"if_include"}, Default: "every interface"}
	IfExclude = &Setting{Key: "if-exclude", Title: "interfaces never to publish", Kind: String,
		Doc: "interfaces and subnets never to publish (like oob_tcp_if_exclude)",
		Go:  []string{"vigil.Config.Addresses.Exclude"}, Flag: "if-exclude", Commands: tcpCmds, FlagDefault: "",
		Env: IfExcludeEnv, EnvFor: EnvLib, C: []string{"if_exclude"}, Default: "none"}
	RanksPerHost = &Setting{Key: "ranks-per-host", Title: "pretended ranks per host", Kind: Int,
		Doc: perHostDoc + ", for host-aware block mending on one machine (0: no hosts)",
		Go:  []string{"node.Config.Hosts"}, Flag: "ranks-per-host", Commands: []string{"run"}, FlagDefault: "0",
		Env: RanksPerHostEnv, EnvFor: EnvLauncher,
		Default: "Go: the bootstrap's hosts (PMIx: each rank's node)", Rule: "≥ 0"}
	DaemonSocket = &Setting{Key: "sock", Title: "daemon's local socket", Kind: String,
		Doc: "Unix socket for local processes ({node} is replaced by the node index)",
		Go:  []string{"daemon.Config.Socket"}, Flag: "sock", Commands: []string{"daemon"}, FlagDefault: "",
		Env: DaemonSocketEnv, EnvFor: EnvLibDaemon, Default: "none"}
	DaemonPPN = &Setting{Key: "ppn", Title: "processes per node", Kind: Int,
		Doc: "application processes per node (rank r runs on node r/ppn)",
		Go:  []string{"daemon.Config.Layout"}, Flag: "ppn", Commands: []string{"daemon"}, FlagDefault: "0",
		Env: "VIGIL_DAEMON_PPN", EnvFor: EnvLibDaemon, Default: "0", Rule: "≥ 0; the variable ≥ 1 when the socket path holds {node}"}
	DaemonKey = &Setting{Key: "daemon-key", Title: "daemons' key (`vigil daemon -peers`)", Kind: String,
		Doc: "with -peers, the daemons' shared secret, hex, at least 16 bytes (vigil keygen makes one)",
		Go:  []string{"daemon.Config.Key"}, Env: "VIGIL_DAEMON_KEY", EnvFor: EnvCommand,
		Default: "from the bootstrap", Rule: "≥ 16 bytes"}
	LibPMIx = &Setting{Key: "libpmix", Title: "PMIx library", Kind: String,
		Doc: "the PMIx library to load under PMIx (a libvigil built with -tags pmix links it)",
		Env: LibPMIxEnv, EnvFor: EnvLib, Default: "libpmix.so.2"}
)

// All lists every setting, in documentation order.
var All = []*Setting{
	// Identity and bootstrap.
	Rank, Size, JobID, Key,
	{Key: "bootstrap", Title: "bootstrap", Kind: Value,
		Doc: "identifies this process in its job and exchanges the transport addresses; the local launcher's server address in the variable",
		Go:  []string{"vigil.Config.Bootstrap"}, Env: BootstrapEnv, EnvFor: EnvLauncher,
		Default: "FromEnvironment: the local launcher's variables, else PMIx's"},
	Peers, Allgather, LibPMIx, Mode,
	// Timing.
	H, Delta, Check, Grace, StartTimeout,
	// Propagation.
	Broadcast, GossipStep, GossipLatency, GossipT, GossipC, GossipF,
	{Key: "gossip-seed", Title: "gossip targets' seed", Kind: Int,
		Doc: "seeds the random gossip targets, to replay a broadcast in tests",
		Go:  []string{"node.Config.Gossip.Seed"}, Default: "the clock"},
	// Block mending.
	{Key: "mend-probe", Title: "block mending window", Kind: Int,
		Doc: "block mending: probe this many predecessors of a dead emitter at once, so a dead host's ranks are known in about 2δ (0: Algorithm 1, one rank per 2δ)",
		Go:  []string{"node.Config.MendProbe"}, Flag: "mend-probe", Commands: agents, FlagDefault: fmt.Sprint(DefaultMendProbe),
		Default: fmt.Sprint(DefaultMendProbe), Rule: "Go: negative for Algorithm 1; flag: ≥ 0, 0 for Algorithm 1"},
	{Key: "mend-early", Title: "early probe", Kind: Duration,
		Doc: "block mending: probe the emitter's predecessors once it has been silent this long, before suspecting it (default: the first check at or past 0.4δ without a heartbeat, the second in a row at least, at most δ/2; negative: at the suspicion)",
		Go:  []string{"node.Config.MendEarly"}, Flag: "mend-early", Commands: agents, FlagDefault: "0s",
		Default: "hb.EarlyProbeAfter(δ, check interval) (0.4δ at δ = 5×h)", Rule: "< δ; negative: at the suspicion"},
	RanksPerHost,
	{Key: "demo-ranks-per-host", Title: "pretended ranks per host (`vigil demo`)", Kind: Int,
		Doc:  perHostDoc + ", as vigil run -ranks-per-host: the fourth scenario kills host 0 (0: no host labels; it kills ranks 0-3)",
		Flag: "ranks-per-host", Commands: []string{"demo"}, FlagDefault: "4", Default: "4", Rule: "0 to n/2"},
	// Heartbeat thread.
	RealTime,
	{Key: "realtime-process", Title: "whole process real-time", Kind: Bool,
		Doc: "with -realtime, every thread of the agent real-time (SCHED_RR at 1, the heartbeat thread SCHED_FIFO at 2), so that the Go runtime's threads that reschedule the heartbeat goroutine are never starved by the application (node.Config.RealTimeProcess)",
		Go:  []string{"node.Config.RealTimeProcess"}, Flag: "realtime-process", Commands: agents, FlagDefault: "true",
		Default: "off (the vigil command: on)"},
	Pin,
	{Key: "hold-p", Title: "heartbeat thread holds a Go P", Kind: Bool,
		Doc:     "keep a Go scheduler P for the heartbeat thread, for a process that runs one node (heartbeat.EmitterConfig.HoldP)",
		Go:      []string{"node.Config.EmitterHoldsP"},
		Default: "off (the vigil command: on)"},
	Emitter,
	// Transport.
	Transport, Heartbeat, Bind, Listen, Advertise, IfInclude, IfExclude,
	{Key: "verbs-device", Title: "RDMA device", Kind: String,
		Doc: "the RDMA device to open over verbs, such as mlx5_0 or rxe0",
		Env: VerbsDeviceEnv, EnvFor: EnvVerbs, Default: "the device of VIGIL_VERBS_NETDEV if set, else the first"},
	{Key: "verbs-netdev", Title: "RDMA device's network interface", Kind: String,
		Doc: "the network interface whose RDMA device (and GIDs) to use over verbs",
		Env: VerbsNetdevEnv, EnvFor: EnvVerbs, Default: "none"},
	{Key: "slots", Title: "heartbeat slot memory", Kind: Value,
		Doc:     "the heartbeat slot array the observer checks: an RDMA transport's registered memory",
		Go:      []string{"node.Config.Slots"},
		Default: "ordinary memory"},
	// Partitions.
	Partition,
	// Agreements.
	{Key: "agree-tree", Title: "agreement tree", Kind: Value,
		Doc: "the tree of the agreements; every rank must use the same one",
		Go:  []string{"node.Config.AgreeTree"}, Default: "era.Binary(Size), the paper's binary tree"},
	{Key: "agree-rebalance", Title: "agreement tree rebalancing", Kind: Bool,
		Doc: "rebuild the tree of each Agree and Shrink over the survivors of the previous one (seed 001, Section 4)",
		Go:  []string{"node.Config.AgreeRebalance"}, Default: "off"},
	{Key: "agree-resend", Title: "agreement nudge period", Kind: Duration,
		Doc: "how often agreements still open are sent again, so that a lost message does not stall one",
		Go:  []string{"node.Config.AgreeResend"}, Default: DefaultAgreeResend.String(), Rule: "negative: never"},
	{Key: "agree-ops", Title: "custom agreement operations", Kind: Value,
		Doc: "extra agreement operations, selected by OpCustom+i; every rank must configure the same list",
		Go:  []string{"node.Config.AgreeOps"}, Default: "none", Rule: "at most 255 − OpCustom"},
	{Key: "on-note", Title: "note handler", Kind: Value,
		Doc: "receives each note another rank published, on the event loop (it must not block)",
		Go:  []string{"node.Config.OnNote"}, Default: "none"},
	// Logs and metrics.
	Log,
	{Key: "log-json", Title: "JSON logs", Kind: Bool,
		Doc:  "log to stderr as JSON objects, one per line (log/slog's JSON handler)",
		Flag: "log-json", Commands: agentsAnd, FlagDefault: "false", Default: "off"},
	{Key: "v", Title: "verbose logs", Kind: Bool,
		Doc:  "log protocol activity to stderr: the same as -log-level info",
		Flag: "v", Commands: agentsAnd, FlagDefault: "false", Default: "off"},
	{Key: "metrics-addr", Title: "metrics endpoint", Kind: String,
		Doc:  metricsDoc,
		Flag: "metrics-addr", Commands: []string{"agent", "daemon"}, FlagDefault: "", Default: "none"},
	{Key: "run-metrics-addr", Title: "metrics endpoints (`vigil run`)", Kind: String,
		Doc:  "every agent serves Prometheus metrics over HTTP at host:0/metrics, each on a free port, printed at start-up (the agents share the host, so the port must be 0; default: no endpoint)",
		Flag: "metrics-addr", Commands: []string{"run"}, FlagDefault: "", Default: "none", Rule: "port 0"},
	{Key: "stats-every", Title: "stats line period", Kind: Duration,
		Doc:  "print a stats line this often (0: only at SIGUSR1 and at the end)",
		Flag: "stats-every", Commands: []string{"agent"}, FlagDefault: "0s", Default: "at SIGUSR1 and at the end", Rule: "≥ 0"},
	// vigil run and demo.
	{Key: "n", Title: "number of ranks (`vigil run`)", Kind: Int,
		Doc:  "number of ranks",
		Flag: "n", Commands: []string{"run"}, FlagDefault: "4", Default: "4", Rule: "1 to 4096"},
	RunFor,
	{Key: "demo-n", Title: "number of ranks (`vigil demo`)", Kind: Int,
		Doc:  "number of ranks",
		Flag: "n", Commands: []string{"demo"}, FlagDefault: "16", Default: "16", Rule: "14 to 4096"},
	{Key: "settle", Title: "settling time (`vigil demo`)", Kind: Duration,
		Doc:  "time to let the ring settle before the first kill",
		Flag: "settle", Commands: []string{"demo"}, FlagDefault: "1s", Default: "1s", Rule: "≥ 0"},
	// The agent's agreement loop.
	{Key: "agree-loop", Title: "agreement loop", Kind: Int,
		Doc:  "run this many agreements in a loop after start-up (0: none)",
		Flag: "agree-loop", Commands: []string{"agent"}, FlagDefault: "0", Default: "none", Rule: "≥ 0"},
	{Key: "agree-log", Title: "agreement log directory", Kind: String,
		Doc:  "with -agree-loop: write each decision to DIR/rank<r>.log (default: no log)",
		Flag: "agree-log", Commands: []string{"agent"}, FlagDefault: "", Default: "none"},
	{Key: "agree-timeout", Title: "agreement loop time-out", Kind: Duration,
		Doc:  "with -agree-loop: give up (and log an error) when one agreement takes longer",
		Flag: "agree-timeout", Commands: []string{"agent"}, FlagDefault: "1m0s", Default: "1m0s", Rule: "> 0"},
	{Key: "agree-pause", Title: "agreement loop pause", Kind: Duration,
		Doc:  "with -agree-loop: wait this long after each agreement (0: back to back)",
		Flag: "agree-pause", Commands: []string{"agent"}, FlagDefault: "0s", Default: "back to back", Rule: "≥ 0"},
	// vigil daemon.
	{Key: "node", Title: "daemon's node index", Kind: Int,
		Doc: "this daemon's node index (with -peers)",
		Go:  []string{"daemon.Config.Node"}, Flag: "node", Commands: []string{"daemon"}, FlagDefault: "0",
		Env: "VIGIL_NODE", EnvFor: EnvLauncher, Default: "from the bootstrap", Rule: "< the number of -peers"},
	DaemonKey, DaemonPPN, DaemonSocket,
	{Key: "daemon-h", Title: "h between daemons", Kind: Duration,
		Doc: "heartbeat period between daemons",
		Go:  []string{"daemon.Config.HeartbeatPeriod"}, Flag: "h", Commands: []string{"daemon"}, FlagDefault: DefaultDaemonHeartbeatPeriod.String(),
		Min: MinHeartbeatPeriod, Max: MaxHeartbeatPeriod, Default: "Go: as h; flag: " + DefaultDaemonHeartbeatPeriod.String(), Rule: "as h"},
	{Key: "daemon-delta", Title: "δ between daemons", Kind: Duration,
		Doc: "suspicion time-out δ between daemons",
		Go:  []string{"daemon.Config.SuspectTimeout"}, Flag: "delta", Commands: []string{"daemon"}, FlagDefault: DefaultDaemonSuspectTimeout.String(),
		Min: MinSuspectTimeout, Max: MaxSuspectTimeout, Default: "Go: as δ; flag: " + DefaultDaemonSuspectTimeout.String(), Rule: "as δ"},
	{Key: "daemon-broadcast", Title: "daemons' propagation", Kind: Choice, Choices: Broadcasts,
		Doc: broadcastDoc,
		Go:  []string{"daemon.Config.Broadcast"}, Flag: "broadcast", Commands: []string{"daemon"}, FlagDefault: DefaultDaemonBroadcast,
		Default: DefaultDaemonBroadcast, Rule: "the same on every daemon"},
	{Key: "daemon-transport", Title: "daemons' transport", Kind: Choice, Choices: []string{"tcp", "verbs"},
		Doc: "the daemons' transport: tcp, or verbs (RDMA; launcher bootstrap only; falls back to tcp with a warning when no RDMA device is there)",
		Go:  []string{"daemon.Config.Transport"}, Flag: "transport", Commands: []string{"daemon"}, FlagDefault: "tcp", Default: "tcp"},
	{Key: "hang", Title: "hang time-out of local processes", Kind: Duration,
		Doc: "hang time-out of local processes (default δ)",
		Go:  []string{"daemon.Config.HangTimeout"}, Flag: "hang", Commands: []string{"daemon"}, FlagDefault: "0s", Default: "δ", Rule: "≥ 0"},
	{Key: "keep-hung", Title: "keep hung processes", Kind: Bool,
		Doc: "report hung local processes but do not kill them",
		Go:  []string{"daemon.Config.KeepHung"}, Flag: "keep-hung", Commands: []string{"daemon"}, FlagDefault: "false", Default: "off: SIGKILL them"},
	{Key: "command", Title: "command per hosted rank", Kind: String,
		Doc:     "the command after --, started once per hosted rank with VIGIL_RANK, VIGIL_NODE and VIGIL_DAEMON_SOCK set, its output to the daemon's standard error",
		Go:      []string{"daemon.Config.Spawn", "daemon.Config.SpawnOut"},
		Default: "none"},
	{Key: "spawn", Title: "ranks started", Kind: Int,
		Doc: "start the command for the first N hosted ranks only (default all)",
		Go:  []string{"daemon.Config.SpawnRanks"}, Flag: "spawn", Commands: []string{"daemon"}, FlagDefault: "0", Default: "all", Rule: "≥ 0"},
	// The PMPI library.
	{Key: "pmpi-mode", Title: "PMPI library's mode", Kind: Choice, Choices: []string{"ring", "sporadic", "daemon", "off"},
		Doc: "what the PMPI library starts at MPI_Init: the observation ring, sporadic probes of the peer of a blocking call, an attachment to the node's vigil daemon, or nothing",
		Env: "VIGIL_PMPI_MODE", EnvFor: EnvPMPI, Default: "ring"},
	{Key: "pmpi-on-failure", Title: "PMPI library's failure policy", Kind: Choice, Choices: []string{"report", "abort"},
		Doc: "report a failure and keep waiting, or call MPI_Abort (the communication calls are wrapped only then, in ring mode)",
		Env: "VIGIL_PMPI_ON_FAILURE", EnvFor: EnvPMPI, Default: "report"},
	{Key: "pmpi-output", Title: "PMPI library's output", Kind: Choice, Choices: []string{"text", "json"},
		Doc: "the PMPI library's failure reports on stderr: text, or one JSON object per line",
		Env: "VIGIL_PMPI_OUTPUT", EnvFor: EnvPMPI, Default: "text"},
	{Key: "pmpi-timeout", Title: "PMPI library's probe time-out", Kind: Duration,
		Doc: "sporadic mode: probe the peer of a blocking call that has not completed after this long",
		Env: "VIGIL_PMPI_TIMEOUT", EnvFor: EnvPMPI, Default: "1s"},
	{Key: "attach", Title: "attach to a daemon", Kind: String,
		Doc:  "attach to the daemon at this socket as -rank and print its events (default $VIGIL_DAEMON_SOCK)",
		Flag: "attach", Commands: []string{"daemon"}, FlagDefault: "", Default: "$VIGIL_DAEMON_SOCK"},
	{Key: "attach-rank", Title: "rank of an attached process", Kind: Int,
		Doc:  "with -attach: this process's rank (default $VIGIL_RANK)",
		Flag: "rank", Commands: []string{"daemon"}, FlagDefault: "-1", Default: "$VIGIL_RANK"},
}
