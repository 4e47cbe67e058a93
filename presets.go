package vigil

import (
	"time"

	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/settings"
)

// DefaultConfig returns the defaults: h = 10 ms, δ = 5×h = 50 ms, the
// double hypercube broadcast, TCP with shared-memory heartbeats, the
// bootstrap from the environment (the settings table's defaults). The
// measurements behind each preset are in docs/presets.md.
func DefaultConfig() Config {
	return Config{
		Config: node.Config{HeartbeatPeriod: settings.DefaultHeartbeatPeriod, SuspectTimeout: 5 * settings.DefaultHeartbeatPeriod,
			Broadcast: settings.DefaultBroadcast},
		Transport: settings.Transport.Default,
		Heartbeat: settings.Heartbeat.Default,
	}
}

// LowLatencyConfig is DefaultConfig with h = 1 ms, δ = 20 ms and a
// real-time heartbeat thread: a crash is suspected after 20 ms of silence
// instead of 50, for 3–5 % of a CPU per process. Measured without false
// reports up to 32 processes on two cores, not at 64 beside CPU burners
// (docs/presets.md): for small jobs, or nodes with cores to spare.
func LowLatencyConfig() Config {
	c := DefaultConfig()
	c.HeartbeatPeriod, c.SuspectTimeout, c.RealTime = time.Millisecond, 20*time.Millisecond, true
	return c
}

// LargeJobConfig is DefaultConfig with h = 100 ms and δ = 1 s (seed 000's
// LOWLAT network): simulated at 1,000 to 256,000 ranks, every survivor
// knew every crash within about δ and a crashed host of 64 ranks within
// 4δ, with no live rank reported (docs/presets.md); a tenth of the
// default's heartbeat messages, and room for the scheduling delays of
// busy nodes.
func LargeJobConfig() Config {
	c := DefaultConfig()
	c.HeartbeatPeriod, c.SuspectTimeout = 100*time.Millisecond, time.Second
	return c
}

// Presets names the presets, for the docs and the tests.
var Presets = []struct {
	Name   string
	Config func() Config
}{{"DefaultConfig", DefaultConfig}, {"LowLatencyConfig", LowLatencyConfig}, {"LargeJobConfig", LargeJobConfig}}
