package main

import (
	"flag"

	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/settings"
)

// daemonDetectorFlags are the flags of the daemons' detector: -h, -delta,
// -pin, -realtime, -broadcast and -gossip-*, defined from the settings
// table (the daemon's -h, -delta and -broadcast have defaults of their
// own). They are read into a detectorFlags (flags.go), so that their
// checks and the node.Config they make are the agent's.
type daemonDetectorFlags struct {
	d detectorFlags
}

// register defines the flags on fs.
func (f *daemonDetectorFlags) register(fs *flag.FlagSet) {
	settingVar(fs, "h", &f.d.h)
	settingVar(fs, "delta", &f.d.delta)
	settingVar(fs, "pin", &f.d.pin)
	settingVar(fs, "realtime", &f.d.realtime)
	f.d.registerPropagation(fs)
}

// config checks the flags with detectorFlags.validate, naming them, and
// returns the daemons' detector configuration (daemon.Config.Config; Rank
// and Size are daemon.Start's). The number of daemons is not known yet:
// daemon.Start checks again.
func (f *daemonDetectorFlags) config() (node.Config, error) {
	d := f.d
	d.transport, d.heartbeat, d.emitter, d.log.level = "tcp", "shm", "native", "warn" // the daemon's own flags
	d.mendProbe = settings.DefaultMendProbe
	if err := d.validate(1); err != nil {
		return node.Config{}, err
	}
	return d.config(), nil
}
