package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil"
	"github.com/vigil-hpc/vigil/launch"
	"github.com/vigil-hpc/vigil/node"
)

// agentOptions are vigil agent's flags.
type agentOptions struct {
	df          detectorFlags
	af          agreeFlags // agree.go
	nf          addrFlags  // addrflags.go
	statsEvery  time.Duration
	metricsAddr string
}

// agentFlags defines vigil agent's flags from the settings table.
func agentFlags() (*flag.FlagSet, *agentOptions) {
	o := new(agentOptions)
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	o.df.register(fs)
	o.af.register(fs)
	o.nf.register(fs)
	settingVar(fs, "stats-every", &o.statsEvery)
	settingVar(fs, "metrics-addr", &o.metricsAddr)
	return fs, o
}

func agentMain(args []string) error {
	fs, o := agentFlags()
	df, af, nf, statsEvery, metricsAddr := &o.df, &o.af, &o.nf, &o.statsEvery, &o.metricsAddr
	if err := fs.Parse(args); err != nil {
		return asUsage(err)
	}
	if err := nf.validate(); err != nil {
		return asUsage(err)
	}
	if err := af.validate(); err != nil {
		return err
	}
	if *statsEvery < 0 {
		return usageErrorf("-stats-every %v: want ≥ 0 (0: only at SIGUSR1 and at the end)", *statsEvery)
	}
	if err := checkMetricsAddr(*metricsAddr); err != nil {
		return err
	}
	if err := df.validate(1); err != nil { // before the launcher: again with the job's size below
		return err
	}
	logger, err := df.log.logger(os.Stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	bs, err := vigil.FromEnvironment(ctx)
	if err != nil {
		cancel()
		return err
	}
	defer bs.Close()
	if err := df.validate(bs.Size()); err != nil {
		cancel()
		return err
	}
	cfg := vigil.Config{Config: df.config(), Bootstrap: bs, Transport: df.transport, Heartbeat: df.heartbeat,
		Addresses: nf.config()}
	cfg.Logger = logger
	nd, err := vigil.Join(ctx, cfg)
	cancel()
	if err != nil {
		return err
	}
	var metrics string // the endpoint's address, for the ready line
	if *metricsAddr != "" {
		m, err := serveMetrics(*metricsAddr, metricsSource{stats: nd.Stats, info: [][2]string{
			{"rank", strconv.Itoa(int(nd.Rank()))}, {"size", strconv.Itoa(bs.Size())}, {"transport", nd.Transport()}}}, logger)
		if err != nil {
			nd.Close()
			return err
		}
		defer m.Close()
		metrics = m.Addr()
	}
	out := json.NewEncoder(os.Stdout)
	emit := func(l launch.Line) {
		l.V, l.Rank, l.Mono = launch.SchemaVersion, uint32(nd.Rank()), node.Mono()
		out.Encode(l)
	}
	// Before "ready": a launcher may signal as soon as it reads it.
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	emit(launch.Line{Ev: "ready", Addr: nd.Addr(), Metrics: metrics})
	if err := af.start(nd.Node, logger); err != nil {
		nd.Close()
		return err
	}
	if df.realtime && !waitRealTime(nd.Node) {
		logger.Info("SCHED_FIFO refused for the heartbeat thread; running at normal priority")
	}

	stats := func() {
		st := nd.Stats()
		var rejected uint64
		for _, v := range st.Transport.Rejected {
			rejected += v
		}
		emit(launch.Line{Ev: "stats", Missed: st.Emitter.Missed, MaxLateNs: st.Emitter.MaxLateNs, Rejected: rejected,
			RealTime: st.Emitter.RealTime, NativeEmitter: st.Emitter.Native, ProcessRT: st.ProcessRT,
			HeartbeatsSent: st.Transport.HeartbeatsSent, MsgsSent: st.Transport.MsgsSent, MsgsRecv: st.Transport.MsgsRecv,
			MsgsDropped: st.Transport.MsgsDropped, BcastsStarted: st.BcastsStarted, BcastsForwarded: st.BcastsForwarded,
			Bad: st.BadMessages, LoopWakes: st.LoopWakes,
			DeathsLearned: st.DeathsLearned, Departures: st.Departures, Reported: st.Reported, Agreements: st.AgreementsDecided,
			RejectedBy: st.Transport.Rejected, BytesSent: st.Transport.BytesSent, BytesRecv: st.Transport.BytesRecv,
			AgreeCalls: st.AgreeReturned, AgreeNs: st.AgreeLatencyNs, AgreeMaxNs: st.AgreeMaxLatencyNs,
			ByKind: byKind(st)})
	}
	emitDead := func(ev node.Event) {
		emit(launch.Line{Ev: "dead", Dead: uint32(ev.Rank), Left: ev.Left, Detector: uint32(ev.Detector),
			DetectedUnix: ev.DetectedAt.UnixNano(), DeliveredMono: ev.DeliveredMono})
	}
	var failCheck <-chan time.Time // the transport failing for good: only verbs can
	if nd.Transport() == "verbs" {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		failCheck = t.C
	}
	var tick <-chan time.Time
	if *statsEvery > 0 {
		t := time.NewTicker(*statsEvery)
		defer t.Stop()
		tick = t.C
	}
	events := nd.Events()
	for {
		select {
		case <-tick:
			stats()
		case <-failCheck:
			if err := nd.TransportFailure(); err != nil {
				emit(launch.Line{Ev: "failed"})
				nd.Close()
				return fmt.Errorf("rank %d: the transport failed, so this rank is silent and the job will evict it: exiting: %w", nd.Rank(), err)
			}
		case <-usr1:
			stats()
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			emitDead(ev)
		case <-nd.Evicted():
			// The deaths learned before the stop are printed before it.
			for drained := false; !drained; {
				select {
				case ev, ok := <-events:
					if ok {
						emitDead(ev)
					} else {
						drained = true
					}
				default:
					drained = true
				}
			}
			stats() // how late its own heartbeat thread ran, among others
			if nd.Minority() {
				emit(launch.Line{Ev: "evicted", Reason: launch.ReasonMinority})
				nd.Close()
				return exitStatus{ExitMinority, fmt.Errorf("rank %d stopped: minority partition (it holds more than half of the job dead, or half without the lowest rank: it is cut off from the larger side, or the job lost most of its ranks at once; -partition=continue goes on instead): exiting", nd.Rank())}
			}
			emit(launch.Line{Ev: "evicted", Reason: launch.ReasonDeclaredDead})
			nd.Close()
			return fmt.Errorf("rank %d was declared dead by the job (paused or cut off for longer than δ): exiting", nd.Rank())
		case sig := <-sigs:
			logger.Info("leaving the job", "rank", nd.Rank(), "signal", sig.String())
			leaveCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := nd.Leave(leaveCtx, 100*time.Millisecond)
			cancel()
			stats()
			nd.Close()
			emit(launch.Line{Ev: "bye"})
			if err != nil {
				return fmt.Errorf("leave: %w", err)
			}
			return nil
		}
	}
}

// waitRealTime reports whether the emitter thread got SCHED_FIFO.
func waitRealTime(nd *node.Node) bool {
	for i := 0; i < 100; i++ {
		if st := nd.Stats().Emitter; st.RealTime || st.Sent > 0 {
			return st.RealTime
		}
		time.Sleep(time.Millisecond)
	}
	return nd.Stats().Emitter.RealTime
}
