package main

import (
	"flag"
	"time"

	"github.com/vigil-hpc/vigil/daemon"
)

// daemonDetectorFlags are the daemon's flags of its detector shared with
// detectorFlags (flags.go), so that their checks stay in one place:
// -broadcast and -gossip-*, defined from the settings table (the daemon's
// -broadcast defaults to the binomial graph). The daemon's own -h, -delta
// and -pin are copied in before the check.
type daemonDetectorFlags struct {
	d detectorFlags
}

// register defines -broadcast and -gossip-* on fs.
func (f *daemonDetectorFlags) register(fs *flag.FlagSet) { f.d.registerPropagation(fs) }

// check validates the flags with detectorFlags.validate, naming them, given
// the daemon's heartbeat period, time-out, pinned CPU (-pin) and -realtime. The
// number of daemons is not known yet: daemon.Start checks again.
func (f *daemonDetectorFlags) check(h, delta time.Duration, pin int, realtime bool) error {
	d := f.d
	d.h, d.delta, d.pin, d.realtime = h, delta, pin, realtime
	d.transport, d.heartbeat, d.emitter, d.log.level = "tcp", "shm", "native", "warn" // checked by the daemon itself
	return d.validate(1)
}

// apply sets the daemons' propagation in cfg.
func (f *daemonDetectorFlags) apply(cfg *daemon.Config) {
	cfg.Broadcast, cfg.Gossip = f.d.broadcast, f.d.gossip
}
