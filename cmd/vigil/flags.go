package main

import (
	"errors"
	"flag"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/settings"
)

// detectorFlags are the node.Config flags shared by run, agent and demo.
type detectorFlags struct {
	h, delta, check, grace time.Duration
	mendEarly              time.Duration
	broadcast, transport   string
	gossip                 node.GossipConfig
	heartbeat, emitter     string
	pin, mendProbe         int
	realtime               bool
	realtimeProcess        bool
	partition              detector.PartitionMode
	log                    logFlags
}

// register defines the flags on fs, whose name is the command's, from the
// settings table.
func (d *detectorFlags) register(fs *flag.FlagSet) {
	settingVar(fs, "h", &d.h)
	settingVar(fs, "delta", &d.delta)
	settingVar(fs, "check", &d.check)
	settingVar(fs, "grace", &d.grace)
	d.registerPropagation(fs)
	settingVar(fs, "transport", &d.transport)
	settingVar(fs, "heartbeat", &d.heartbeat)
	settingVar(fs, "emitter", &d.emitter)
	settingVar(fs, "mend-probe", &d.mendProbe)
	settingVar(fs, "mend-early", &d.mendEarly)
	settingVar(fs, "pin", &d.pin)
	settingVar(fs, "realtime", &d.realtime)
	settingVar(fs, "realtime-process", &d.realtimeProcess)
	settingVar(fs, "partition", partitionValue{&d.partition})
	d.log.register(fs)
}

// registerPropagation defines -broadcast and -gossip-* (run, agent, demo
// and daemon).
func (d *detectorFlags) registerPropagation(fs *flag.FlagSet) {
	settingVar(fs, "broadcast", &d.broadcast)
	settingVar(fs, "gossip-step", &d.gossip.Step)
	settingVar(fs, "gossip-latency", &d.gossip.Latency)
	settingVar(fs, "gossip-t", &d.gossip.T)
	settingVar(fs, "gossip-c", &d.gossip.C)
	settingVar(fs, "gossip-f", &d.gossip.F)
}

// partitionValue is the -partition flag (detector.ParsePartitionMode).
type partitionValue struct{ m *detector.PartitionMode }

func (v partitionValue) String() string {
	if v.m == nil {
		return detector.PartitionFailStop.String()
	}
	return v.m.String()
}

func (v partitionValue) Set(s string) error {
	m, err := detector.ParsePartitionMode(s)
	if err != nil {
		return fmt.Errorf("want %s", strings.Join(settings.Partition.Choices, " or "))
	}
	*v.m = m
	return nil
}

// args renders the flags back for child agents.
func (d *detectorFlags) args() []string {
	a := []string{
		"-h", d.h.String(), "-delta", d.delta.String(), "-broadcast", d.broadcast,
		"-transport", d.transport, "-heartbeat", d.heartbeat, "-emitter", d.emitter, "-pin", strconv.Itoa(d.pin),
		"-check", d.check.String(), "-grace", d.grace.String(), "-mend-probe", strconv.Itoa(d.mendProbe),
		"-mend-early", d.mendEarly.String(),
		"-gossip-step", d.gossip.Step.String(), "-gossip-latency", d.gossip.Latency.String(),
		"-gossip-t", strconv.Itoa(d.gossip.T), "-gossip-c", strconv.Itoa(d.gossip.C), "-gossip-f", strconv.Itoa(d.gossip.F),
	}
	a = append(a, "-realtime="+strconv.FormatBool(d.realtime), "-realtime-process="+strconv.FormatBool(d.realtimeProcess),
		"-partition", d.partition.String())
	return append(a, d.log.args()...)
}

func (d *detectorFlags) config() node.Config {
	c := node.Config{
		HeartbeatPeriod: d.h,
		SuspectTimeout:  d.delta,
		CheckPeriod:     d.check,
		StartGrace:      d.grace,
		Broadcast:       d.broadcast,
		Gossip:          d.gossip,
		MendProbe:       d.mendProbe,
		MendEarly:       d.mendEarly,
		RealTime:        d.realtime,
		RealTimeProcess: d.realtimeProcess,
		EmitterHoldsP:   true, // one node per process
		GoEmitter:       d.emitter == "go",
		Partition:       d.partition,
	}
	if d.pin >= 0 {
		c.PinEmitter, c.EmitterCPU = true, d.pin
	}
	if d.mendProbe == 0 {
		c.MendProbe = -1 // Algorithm 1
	}
	return c
}

// validate checks the flags, naming the flag and value of a bad one; its
// errors are usageErrors.
func (d *detectorFlags) validate(size int) error {
	return asUsage(d.checkValues(size))
}

func (d *detectorFlags) checkValues(size int) error {
	if err := d.log.validate(); err != nil {
		return err
	}
	for _, c := range []struct {
		s *settings.Setting
		v string
	}{{settings.Transport, d.transport}, {settings.Heartbeat, d.heartbeat}, {settings.Emitter, d.emitter},
		{settings.Broadcast, d.broadcast}} {
		if err := settings.CheckChoice(c.s, settings.FlagNames, c.v); err != nil {
			return err
		}
	}
	if d.mendProbe < 0 {
		return fmt.Errorf("-mend-probe %d: want ≥ 0 (0: Algorithm 1's one-at-a-time mending)", d.mendProbe)
	}
	// The bounds of the timing and of -gossip-* are node.Config.Validate's
	// (the settings table's and bcast.GossipConfig's), named as flags.
	c := d.config()
	c.Size = max(size, 1)
	if err := c.Validate(); err != nil {
		if be, ok := errors.AsType[*settings.BoundError](err); ok {
			return errors.New(be.In(settings.FlagNames))
		}
	}
	switch {
	case d.mendEarly >= c.WithDefaults().SuspectTimeout:
		return fmt.Errorf("-mend-early %v: want below -delta %v (0: the default; negative: probe at the suspicion)", d.mendEarly, d.delta)
	case d.pin >= runtime.NumCPU():
		return fmt.Errorf("-pin %d: this machine has CPUs 0–%d (-1: not pinned)", d.pin, runtime.NumCPU()-1)
	case d.pin < -1:
		return fmt.Errorf("-pin %d: want a CPU number, or -1 for not pinned", d.pin)
	}
	c.Size = size
	return c.Validate()
}

// durationValue is a time.Duration flag whose error says that a unit is
// needed ("-h 10" is not 10 ms).
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil {
		return "0s"
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration with a unit, such as 10ms, 500us or 2s")
	}
	*v.d = d
	return nil
}

// durationVar defines a duration flag with durationValue's error.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var(durationValue{p}, name, usage+"; a `duration` with a unit")
}
