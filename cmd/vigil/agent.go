package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/launch"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/transport"
	"github.com/vigil-hpc/vigil/transport/shm"
	"github.com/vigil-hpc/vigil/transport/tcp"
)

func agentMain(args []string) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	var df detectorFlags
	df.register(fs, node.DefaultHeartbeatPeriod, 5*node.DefaultHeartbeatPeriod)
	var af agreeFlags // agree.go
	af.register(fs)
	var nf addrFlags // addrflags.go
	nf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := nf.validate(); err != nil {
		return err
	}
	bs, err := joinBootstrap()
	if err != nil {
		return err
	}
	defer bs.Close()
	if err := df.validate(bs.Size()); err != nil {
		return err
	}
	level := slog.LevelWarn
	if df.verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg := df.config()
	cfg.Rank, cfg.Size, cfg.Logger = bs.Rank(), bs.Size(), logger
	var vt *verbsTransport
	if df.transport == "verbs" {
		if vt, err = openVerbs(bs, logger); err != nil {
			vt = nil
			logger.Warn("verbs transport unavailable, using tcp", "reason", err.Error())
		} else {
			cfg.Slots = vt.Slots() // heartbeats are RDMA-written into registered memory
		}
	}

	// Heartbeats between the ranks of this host: stores into shared memory.
	var region *shm.Region
	shmParams := wire.Params{JobID: bs.JobID(), Key: bs.Key(), Rank: bs.Rank(), N: bs.Size()}
	if vt == nil && df.heartbeat == "shm" {
		if region, err = shm.NewRegion(shmParams, logger); err != nil {
			return err
		}
		defer region.Close()
		cfg.Slots = region.Slots()
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	var published string // the TCP address this rank published
	open := func(slots *hb.Slots, h transport.Handler) (transport.Transport, error) {
		if vt != nil {
			if err := startVerbs(vt, func(a string) ([]string, error) { return bs.Exchange(ctx, a) }, h); err != nil {
				vt.Close()
				return nil, fmt.Errorf("verbs transport: %w", err)
			}
			return vt, nil
		}
		addr, err := nf.choose(bs)
		if err != nil {
			return nil, err
		}
		tr, err := tcp.Join(ctx, tcp.Config{Self: bs.Rank(), N: bs.Size(), JobID: bs.JobID(), Key: bs.Key(),
			ListenAddr: addr.Bind, Slots: slots, Handler: h, Logger: logger}, publishing(addr, bs.Exchange, &published))
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		if region != nil {
			return shm.Wrap(tr, shmParams, logger), nil
		}
		return tr, nil
	}
	nd, err := node.Start(cfg, open)
	cancel()
	if err != nil {
		return err
	}
	out := json.NewEncoder(os.Stdout)
	emit := func(l launch.Line) {
		l.Rank, l.Mono = uint32(nd.Rank()), node.Mono()
		out.Encode(l)
	}
	emit(launch.Line{Ev: "ready", Addr: published})
	if err := af.start(nd, logger); err != nil {
		nd.Close()
		return err
	}
	if df.realtime && !waitRealTime(nd) {
		logger.Info("SCHED_FIFO refused for the heartbeat thread; running at normal priority")
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	events := nd.Events()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			emit(launch.Line{Ev: "dead", Dead: uint32(ev.Rank), Left: ev.Left, Detector: uint32(ev.Detector),
				DetectedUnix: ev.DetectedAt.UnixNano(), DeliveredMono: ev.DeliveredMono})
		case <-nd.Evicted():
			emit(launch.Line{Ev: "evicted"})
			nd.Close()
			return fmt.Errorf("rank %d was declared dead by the job (paused or cut off for longer than δ): exiting", nd.Rank())
		case <-sigs:
			leaveCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := nd.Leave(leaveCtx, 100*time.Millisecond)
			cancel()
			st := nd.Stats()
			var rejected uint64
			for _, v := range st.Transport.Rejected {
				rejected += v
			}
			emit(launch.Line{Ev: "stats", Missed: st.Emitter.Missed, MaxLateNs: st.Emitter.MaxLateNs, Rejected: rejected, RealTime: st.Emitter.RealTime,
				ProcessRT: st.ProcessRT})
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
