package main

import (
	"flag"
	"time"

	"github.com/vigil-hpc/vigil/daemon"
)

// propagationFlagNames are the flags of the propagation that `vigil
// daemon` shares with run, agent and demo.
var propagationFlagNames = []string{"broadcast", "gossip-step", "gossip-latency", "gossip-t", "gossip-c", "gossip-f"}

// daemonDetectorFlags are the daemon's flags of its detector taken from
// detectorFlags (flags.go), so that their definitions (usage, defaults)
// and checks stay in one place: -broadcast and -gossip-*. The daemon's
// own -h, -delta and -pin are copied in before the check.
type daemonDetectorFlags struct {
	d detectorFlags
}

// register defines -broadcast (default daemon.DefaultBroadcast, the
// binomial graph) and -gossip-* on fs, as detectorFlags does.
func (f *daemonDetectorFlags) register(fs *flag.FlagSet) {
	all := flag.NewFlagSet("detector", flag.ContinueOnError)
	f.d.register(all, 0, 0) // only the propagation flags are kept; -h and -delta are the daemon's
	for _, name := range propagationFlagNames {
		fl := all.Lookup(name)
		if name == "broadcast" {
			fl.Value.Set(daemon.DefaultBroadcast)
		}
		fs.Var(fl.Value, name, fl.Usage)
	}
}

// check validates the flags with detectorFlags.validate, naming them, given
// the daemon's heartbeat period, time-out, pinned CPU (-pin) and -realtime. The
// number of daemons is not known yet: daemon.Start checks again.
func (f *daemonDetectorFlags) check(h, delta time.Duration, pin int, realtime bool) error {
	d := f.d
	d.h, d.delta, d.pin, d.realtime = h, delta, pin, realtime
	d.transport, d.heartbeat = "tcp", "shm" // the daemon checks its -transport itself
	return d.validate(1)
}

// apply sets the daemons' propagation in cfg.
func (f *daemonDetectorFlags) apply(cfg *daemon.Config) {
	cfg.Broadcast, cfg.Gossip = f.d.broadcast, f.d.gossip
}
