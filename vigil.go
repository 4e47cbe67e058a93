// Package vigil is the Go entry point to Vigil, an RDMA-native failure
// detector, failure propagator and agreement service for HPC jobs.
//
// Every process of a job calls Join with the job's bootstrap (the
// environment of `vigil run` or of a PMIx launcher such as mpirun, or
// explicit peers through NewLocalJob in one process) and gets a Detector:
// the ranks it learns are gone (Events, Dead), agreements on a value and on
// the set of the dead (Agree, Shrink), and a clean departure (Leave).
//
//	d, err := vigil.Join(ctx, vigil.DefaultConfig())
//	for ev := range d.Events() { ... }
//
// Underneath: package detector is the protocol as one pure state machine,
// package node the runtime that drives it with a heartbeat thread and a
// transport (TCP with UDP or shared-memory heartbeats, or verbs).
package vigil

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/vigil-hpc/vigil/bootstrap"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/settings"
	"github.com/vigil-hpc/vigil/transport"
	"github.com/vigil-hpc/vigil/transport/netaddr"
	"github.com/vigil-hpc/vigil/transport/shm"
	"github.com/vigil-hpc/vigil/transport/tcp"
)

// Config configures one process's detector. Start from DefaultConfig.
type Config struct {
	// Config is the detector's (timing, broadcast overlay, agreements,
	// real-time). Rank and Size are filled in from the bootstrap.
	node.Config
	// Bootstrap identifies this process in its job and exchanges the
	// transport addresses (default: FromEnvironment).
	Bootstrap bootstrap.Bootstrap
	// Transport is "tcp" (default) or "verbs" (RDMA; falls back to tcp,
	// with a warning, when no RDMA device or no verbs support is there).
	Transport string
	// Heartbeat is the heartbeat path with tcp: "shm" (default: stores
	// into the observer's shared memory on this host, UDP to other hosts)
	// or "udp".
	Heartbeat string
	// Addresses selects the TCP address to listen on and to publish.
	Addresses netaddr.Config
}

// ErrBootstrap and ErrTransport classify Join's failures (errors.Is):
// joining the bootstrap or the address exchange failed (ErrBootstrap), or
// the transport could not be set up: an unusable address setting, no
// address, listening, shared memory, verbs (ErrTransport). Other failures
// are invalid settings.
var (
	ErrBootstrap = errors.New("vigil: bootstrap or address exchange failed")
	ErrTransport = errors.New("vigil: transport set-up failed")
)

// classed is err classified under class, with err's message.
type classed struct{ err, class error }

func (e *classed) Error() string   { return e.err.Error() }
func (e *classed) Unwrap() []error { return []error{e.err, e.class} }

// classify marks err with class unless it already carries a class.
func classify(class, err error) error {
	if errors.Is(err, ErrBootstrap) || errors.Is(err, ErrTransport) {
		return err
	}
	return &classed{err, class}
}

// exchange publishes addr through bs and returns every rank's address.
func exchange(ctx context.Context, bs bootstrap.Bootstrap, addr string) ([]string, error) {
	addrs, err := bs.Exchange(ctx, addr)
	if err != nil {
		return nil, classify(ErrBootstrap, fmt.Errorf("address exchange: %w", err))
	}
	if len(addrs) != bs.Size() {
		return nil, classify(ErrBootstrap, fmt.Errorf("address exchange gave %d addresses for %d ranks", len(addrs), bs.Size()))
	}
	return addrs, nil
}

// Detector is a running failure detector: a *node.Node (Events, Dead,
// Known, Agree, Shrink, Leave, Stats…) with what Join set up for it.
type Detector struct {
	*node.Node
	bs        bootstrap.Bootstrap
	ownBS     bool
	region    *shm.Region
	published string
	transport string
	hosts     []string        // the host of every rank given to the node (nil: none)
	verbs     *verbsTransport // over verbs: for VerbsStats
}

// JoinTimeout bounds Join's address exchange when ctx has no deadline: a
// rank that never calls Join (it died first) fails the others' Join
// instead of holding them for ever.
var JoinTimeout = 60 * time.Second

// startFenceMark is what a rank publishes in the start fence (a rank that
// failed publishes nothing).
const startFenceMark = "started"

// Join starts this process's detector: it joins the bootstrap, opens the
// transport, exchanges addresses with every rank (ctx bounds the exchange,
// JoinTimeout when ctx has no deadline) and starts the heartbeat thread;
// then it waits in a second fence (the start fence) until every rank's
// heartbeat thread runs, and only then counts the start-up grace: a rank
// that is slow to come up delays the job's start, and is never reported
// for it. Every rank of the job must call it. A rank that fails after
// joining the bootstrap (a bad address setting, a port in use…) still
// takes part in both fences, publishing no address, so the others do not
// hang: they start and report it dead.
// Failures are classified by ErrBootstrap and ErrTransport. Unless
// cfg.Hosts is set, the bootstrap's placement (bootstrap.Hosts) fills it,
// for host-aware block mending.
func Join(ctx context.Context, cfg Config) (*Detector, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, JoinTimeout)
		defer cancel()
	}
	if cfg.Transport == "" {
		cfg.Transport = settings.Transport.Default
	}
	if cfg.Heartbeat == "" {
		cfg.Heartbeat = settings.Heartbeat.Default
	}
	switch {
	case cfg.Transport != "tcp" && cfg.Transport != "verbs":
		return nil, fmt.Errorf("vigil: Config.Transport = %q, want \"tcp\" or \"verbs\"", cfg.Transport)
	case cfg.Heartbeat != "shm" && cfg.Heartbeat != "udp":
		return nil, fmt.Errorf("vigil: Config.Heartbeat = %q, want \"shm\" or \"udp\"", cfg.Heartbeat)
	}
	if err := cfg.Addresses.Validate(); err != nil {
		return nil, classify(ErrTransport, err)
	}
	d := &Detector{bs: cfg.Bootstrap, transport: cfg.Transport}
	if d.bs == nil {
		bs, err := FromEnvironment(ctx)
		if err != nil {
			return nil, classify(ErrBootstrap, err)
		}
		d.bs, d.ownBS = bs, true
	}
	bs := d.bs
	// The bootstrap's two fences: the transport's addresses, then the
	// start fence once the heartbeat thread runs (node.StartFenced).
	exchanged, fenced := false, false
	fail := func(err error) (*Detector, error) {
		// Take part in the fences anyway, publishing no address, so that
		// the other ranks do not wait for this one until their time-out:
		// they start without it and report it dead.
		if !exchanged {
			bs.Exchange(ctx, "")
		}
		if !fenced {
			bs.Exchange(ctx, "")
		}
		d.release()
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	nc := cfg.Config
	nc.Rank, nc.Size, nc.Logger = bs.Rank(), bs.Size(), logger
	if nc.Hosts == nil {
		nc.Hosts = bootstrap.Hosts(bs) // host-aware block mending
	}
	if err := nc.Validate(); err != nil {
		return fail(err)
	}

	var vt *verbsTransport
	if cfg.Transport == "verbs" {
		var err error
		if vt, err = openVerbs(bs, logger); err != nil {
			vt = nil
			d.transport = "tcp"
			logger.Warn("verbs transport unavailable, using tcp", "reason", err.Error())
		} else {
			nc.Slots = vt.Slots() // heartbeats are RDMA-written into registered memory
		}
	}
	// Heartbeats between the ranks of this host: stores into shared memory.
	params := wire.Params{JobID: bs.JobID(), Key: bs.Key(), Rank: bs.Rank(), N: bs.Size()}
	if vt == nil && cfg.Heartbeat == "shm" {
		var err error
		if d.region, err = shm.NewRegion(params, logger); err != nil {
			return fail(classify(ErrTransport, err))
		}
		nc.Slots = d.region.Slots()
	}
	open := func(slots *transport.Slots, h transport.Handler) (transport.Transport, error) {
		if vt != nil {
			if err := startVerbs(vt, func(a string) ([]string, error) { exchanged = true; return exchange(ctx, bs, a) }, h); err != nil {
				vt.Close()
				return nil, classify(ErrTransport, fmt.Errorf("verbs transport: %w", err))
			}
			return vt, nil
		}
		choice, err := netaddr.ChooseFor(cfg.Addresses, bootstrap.Nodes(bs))
		if err != nil {
			return nil, classify(ErrTransport, err)
		}
		logger.Debug("tcp address", "bind", choice.Bind, "advertise", choice.Advertise.String(), "why", choice.Why)
		var table []string // every rank's address, once exchanged
		publish := choice.Publishing(func(ctx context.Context, pub string) ([]string, error) {
			exchanged = true
			addrs, err := exchange(ctx, bs, pub)
			table = addrs
			return addrs, err
		}, &d.published)
		tr, err := tcp.Join(ctx, tcp.Config{Self: bs.Rank(), N: bs.Size(), JobID: bs.JobID(), Key: bs.Key(),
			ListenAddr: choice.Bind, Slots: slots, Handler: h, Logger: logger}, publish)
		if err != nil {
			if table != nil { // the transport refused the exchanged table
				return nil, classify(ErrBootstrap, err)
			}
			return nil, classify(ErrTransport, err)
		}
		if d.region != nil {
			return shm.Wrap(tr, params, logger), nil
		}
		return tr, nil
	}
	fence := func() error {
		fenced = true
		if _, err := bs.Exchange(ctx, startFenceMark); err != nil {
			return classify(ErrBootstrap, err)
		}
		return nil
	}
	nd, err := node.StartFenced(nc, open, fence)
	if err != nil {
		return fail(err)
	}
	d.Node, d.verbs, d.hosts = nd, vt, nc.Hosts
	return d, nil
}

// Hosts returns the host of every rank, indexed by rank, that the detector
// was given for host-aware block mending (Config.Hosts, else the
// bootstrap's), or nil when none; the detector ignores hosts that name
// fewer than two.
func (d *Detector) Hosts() []string { return d.hosts }

// VerbsTransport opens the verbs transport of bs's rank (on the device
// named by VIGIL_VERBS_DEVICE, default the one carrying VIGIL_VERBS_NETDEV
// if set, else the first, restricted to the GIDs of VIGIL_VERBS_NETDEV if
// set) for a runtime that assembles its own detector,
// such as a daemon (daemon.Config's Slots and Transport): it returns the
// registered memory the heartbeats land in, and the node.OpenTransport that
// exchanges addresses through bs (ctx bounds the exchange) and starts it.
// The error says why verbs cannot be used (no device, a build without
// verbs).
func VerbsTransport(ctx context.Context, bs bootstrap.Bootstrap, logger *slog.Logger) (*transport.Slots, node.OpenTransport, error) {
	vt, err := openVerbs(bs, logger)
	if err != nil {
		return nil, nil, err
	}
	open := func(_ *transport.Slots, h transport.Handler) (transport.Transport, error) {
		if err := startVerbs(vt, func(a string) ([]string, error) { return exchange(ctx, bs, a) }, h); err != nil {
			vt.Close()
			return nil, fmt.Errorf("verbs transport: %w", err)
		}
		return vt, nil
	}
	return vt.Slots(), open, nil
}

// Addr returns the TCP address this rank published ("" over verbs).
func (d *Detector) Addr() string { return d.published }

// Transport returns the transport in use: "tcp", or "verbs".
func (d *Detector) Transport() string { return d.transport }

// Close stops the detector (without a LEAVE: call Leave first for a clean
// departure) and releases what Join set up.
func (d *Detector) Close() error {
	err := d.Node.Close()
	return errors.Join(err, d.release())
}

func (d *Detector) release() error {
	var errs []error
	if d.region != nil {
		errs = append(errs, d.region.Close())
		d.region = nil
	}
	if d.ownBS && d.bs != nil {
		errs = append(errs, d.bs.Close())
		d.bs = nil
	}
	return errors.Join(errs...)
}
