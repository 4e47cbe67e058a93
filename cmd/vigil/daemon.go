package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil"
	"github.com/vigil-hpc/vigil/bootstrap"
	"github.com/vigil-hpc/vigil/daemon"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/settings"
	"github.com/vigil-hpc/vigil/transport/netaddr"
)

// daemonSchemaVersion is the version of `vigil daemon`'s output lines
// (daemonLine.V), a format of its own beside the agent's. It grows when a
// field changes meaning or goes away, not when one is added.
const daemonSchemaVersion = 1

// daemonLine is one JSON line of `vigil daemon`: ready, a failure event
// (node or proc), evicted, or attached (in -attach mode).
type daemonLine struct {
	// V is the schema version (daemonSchemaVersion) on every line.
	V int `json:"v"`
	daemon.Event
	Mono int64 `json:"mono"`
	// Self is the printing daemon's node (daemon mode) or rank (attach mode).
	Self ranks.Rank `json:"self"`
	Pid  int        `json:"pid,omitempty"`
	// Metrics is the metrics endpoint's address on a ready line with
	// -metrics-addr.
	Metrics string `json:"metrics,omitempty"`
}

// daemonOptions are vigil daemon's flags.
type daemonOptions struct {
	node                        uint
	peers, listen, sock, attach string
	nf                          addrFlags // addrflags.go; without -peers, -advertise and -if-* choose the published address
	ppn, spawn, rank            int
	jobID                       uint64
	hang                        time.Duration
	keepHung                    bool
	lf                          logFlags // logflags.go: -log-level, -log-json, -v
	metricsAddr, transport      string
	df                          daemonDetectorFlags // daemon_flags.go: -h, -delta, -pin, -realtime, -broadcast and -gossip-*, as the agent's
}

// daemonFlags defines vigil daemon's flags from the settings table.
func daemonFlags() (*flag.FlagSet, *daemonOptions) {
	o := new(daemonOptions)
	fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
	settingVar(fs, "node", &o.node)
	settingVar(fs, "peers", &o.peers)
	settingVar(fs, "listen", &o.listen)
	o.nf.register(fs)
	settingVar(fs, "ppn", &o.ppn)
	settingVar(fs, "job-id", &o.jobID)
	settingVar(fs, "hang", &o.hang)
	settingVar(fs, "keep-hung", &o.keepHung)
	settingVar(fs, "spawn", &o.spawn)
	settingVar(fs, "sock", &o.sock)
	settingVar(fs, "attach", &o.attach)
	settingVar(fs, "rank", &o.rank)
	o.lf.register(fs)
	settingVar(fs, "metrics-addr", &o.metricsAddr)
	settingVar(fs, "transport", &o.transport)
	o.df.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: vigil daemon -node i -peers a0,a1,... [-ppn K -sock path] [-- command args]\n"+
			"       mpirun --map-by ppr:1:node vigil daemon [-ppn K -sock path] [-- command args]\n"+
			"       vigil daemon -attach path -rank r\n"+
			"With -peers the job key is read from $VIGIL_DAEMON_KEY (hex, ≥ 16 bytes; vigil keygen makes one). With a command, the daemon starts it\n"+
			"once per hosted rank with VIGIL_RANK, VIGIL_NODE and %s set.\n", daemon.EnvSocket)
		fs.PrintDefaults()
	}
	return fs, o
}

// daemonMain runs one node's daemon (seed 003's node-level mode), or, with
// -attach, one local process attached to its daemon that prints the
// failures it is told.
func daemonMain(args []string) error {
	fs, o := daemonFlags()
	nodeIdx, peers, listen, nf, ppn, jobID := &o.node, &o.peers, &o.listen, &o.nf, &o.ppn, &o.jobID
	hang, keepHung, spawnN, sock, attach, rank := &o.hang, &o.keepHung, &o.spawn, &o.sock, &o.attach, &o.rank
	lf, metricsAddr, tport, df := &o.lf, &o.metricsAddr, &o.transport, &o.df
	if err := fs.Parse(args); err != nil {
		return asUsage(err)
	}
	if err := nf.validate(); err != nil {
		return asUsage(err)
	}
	if err := checkMetricsAddr(*metricsAddr); err != nil {
		return err
	}
	switch {
	case *listen != "" && nf.bind != "" && *listen != nf.bind:
		return usageErrorf("daemon: -listen %q and -bind %q differ: set one of them", *listen, nf.bind)
	case *listen != "":
		nf.bind = *listen
	}
	logger, err := lf.logger(os.Stderr)
	if err != nil {
		return err
	}
	out := json.NewEncoder(os.Stdout)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	if *attach != "" || (os.Getenv(daemon.EnvSocket) != "" && *peers == "") {
		return attachMain(*attach, *rank, out, sigs)
	}
	if err := settings.CheckChoice(settings.ByFlag("daemon", "transport"), settings.FlagNames, *tport); err != nil {
		return usageErrorf("daemon: %v", err)
	}
	switch {
	case *ppn < 0:
		return usageErrorf("daemon: -ppn %d: want ≥ 0", *ppn)
	case *spawnN < 0:
		return usageErrorf("daemon: -spawn %d: want ≥ 0 (0: every hosted rank)", *spawnN)
	case *hang < 0:
		return usageErrorf("daemon: -hang %v: want ≥ 0 (0: δ)", *hang)
	}
	dc, err := df.config()
	if err != nil {
		return asUsage(fmt.Errorf("daemon: %w", err))
	}
	dc.Logger = logger
	cfg := daemon.Config{Config: dc, Listen: nf.bind, HangTimeout: *hang, KeepHung: *keepHung, Spawn: fs.Args(), SpawnRanks: *spawnN}
	if *peers != "" {
		if n := strings.Count(*peers, ",") + 1; *nodeIdx >= uint(n) {
			return usageErrorf("daemon: -node %d: want below the %d addresses of -peers", *nodeIdx, n)
		}
		if *tport == "verbs" {
			return usageErrorf("daemon: -transport verbs needs the launcher's bootstrap (mpirun, srun or vigil run) to exchange RDMA addresses, not -peers")
		}
		key, err := hex.DecodeString(os.Getenv("VIGIL_DAEMON_KEY"))
		if err != nil || len(key) < 16 {
			return errors.New("daemon: $VIGIL_DAEMON_KEY must hold a hex key of at least 16 bytes")
		}
		if nf.advertise != "" || nf.include != "" || nf.exclude != "" {
			return usageErrorf("daemon: with -peers every address is given: -advertise, -if-include and -if-exclude apply only to addresses exchanged through the launcher")
		}
		cfg.Peers = strings.Split(*peers, ",")
		if *jobID == 0 {
			sum := sha256.Sum256(append([]byte("vigil daemon job id\x00"), key...))
			*jobID = max(binary.LittleEndian.Uint64(sum[:8]), 1)
		}
		cfg.Node, cfg.Layout, cfg.JobID, cfg.Key = ranks.Rank(*nodeIdx), daemon.Layout{Nodes: len(cfg.Peers), PPN: *ppn}, *jobID, key
	} else {
		// One daemon per rank of the launcher's job (mpirun --map-by
		// ppr:1:node, srun --ntasks-per-node=1, or vigil run).
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		bs, err := vigil.FromEnvironment(ctx)
		if err != nil {
			return fmt.Errorf("daemon: no -peers, and %w", err)
		}
		defer bs.Close()
		cfg.Node, cfg.Layout, cfg.JobID, cfg.Key = bs.Rank(), daemon.Layout{Nodes: bs.Size(), PPN: *ppn}, bs.JobID(), bs.Key()
		if *tport == "verbs" {
			slots, open, err := vigil.VerbsTransport(ctx, bs, logger)
			if err == nil {
				cfg.Slots, cfg.Transport = slots, open
			} else {
				logger.Warn("verbs transport unavailable, using tcp", "reason", err.Error())
			}
		}
		addr, err := netaddr.ChooseFor(nf.config(), bootstrap.Nodes(bs))
		if err != nil {
			return fmt.Errorf("daemon: %w", err)
		}
		logger.Debug("tcp address", "bind", addr.Bind, "advertise", addr.Advertise.String(), "why", addr.Why)
		publish := addr.Publishing(bs.Exchange, nil)
		cfg.Listen, cfg.Exchange = addr.Bind, func(a string) ([]string, error) { return publish(ctx, a) }
	}
	cfg.Socket = strings.ReplaceAll(*sock, "{node}", strconv.Itoa(int(cfg.Node)))
	d, err := daemon.Start(cfg)
	if err != nil {
		return err
	}
	defer d.Close()
	var metrics string
	if *metricsAddr != "" {
		m, err := serveMetrics(*metricsAddr, metricsSource{stats: d.Stats, info: [][2]string{
			{"node", strconv.Itoa(int(d.Node()))}, {"nodes", strconv.Itoa(cfg.Layout.Nodes)}, {"transport", daemonTransport(cfg)}}}, logger)
		if err != nil {
			return err
		}
		defer m.Close()
		metrics = m.Addr()
	}
	evs := d.Events()
	out.Encode(daemonLine{V: daemonSchemaVersion, Event: daemon.Event{Kind: "ready", Node: d.Node()}, Self: d.Node(), Mono: node.Mono(), Pid: os.Getpid(),
		Metrics: metrics})
	for {
		select {
		case ev := <-evs:
			out.Encode(daemonLine{V: daemonSchemaVersion, Event: ev, Self: d.Node(), Mono: ev.DeliveredMono})
		case <-d.Evicted():
			out.Encode(daemonLine{V: daemonSchemaVersion, Event: daemon.Event{Kind: "evicted", Node: d.Node()}, Self: d.Node(), Mono: node.Mono()})
			if d.Minority() {
				return exitStatus{ExitMinority, fmt.Errorf("daemon: node %d stopped: minority partition (it holds most of the other nodes dead): exiting", d.Node())}
			}
			return fmt.Errorf("daemon: node %d was declared dead by the other daemons (paused or cut off for longer than δ): exiting", d.Node())
		case <-sigs:
			return nil
		}
	}
}

// attachMain is `vigil daemon -attach`: a stand-in application process.
func attachMain(path string, rank int, out *json.Encoder, sigs <-chan os.Signal) error {
	if path == "" {
		path = os.Getenv(daemon.EnvSocket)
	}
	if rank < 0 {
		r, err := strconv.Atoi(os.Getenv("VIGIL_RANK"))
		if err != nil || r < 0 {
			return errors.New("daemon: -attach needs -rank or $VIGIL_RANK")
		}
		rank = r
	}
	cl, err := daemon.Attach(path, ranks.Rank(rank))
	if err != nil {
		return err
	}
	out.Encode(daemonLine{V: daemonSchemaVersion, Event: daemon.Event{Kind: "attached", Rank: ranks.Rank(rank), Node: cl.Node()},
		Self: ranks.Rank(rank), Mono: node.Mono(), Pid: os.Getpid()})
	evs := cl.Events()
	for {
		select {
		case ev, ok := <-evs:
			if !ok {
				return errors.New("daemon: the node's daemon closed the connection")
			}
			out.Encode(daemonLine{V: daemonSchemaVersion, Event: ev, Self: ranks.Rank(rank), Mono: ev.DeliveredMono})
		case <-sigs:
			return cl.Close(true)
		}
	}
}

// daemonTransport names the daemons' transport: verbs when one was set up,
// else tcp.
func daemonTransport(cfg daemon.Config) string {
	if cfg.Transport != nil {
		return "verbs"
	}
	return "tcp"
}
