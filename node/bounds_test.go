package node

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/settings"
)

// TestTimingBounds: Validate refuses the timing settings out of their
// documented bounds with a *BoundError naming the field, and accepts the
// bounds themselves; the defaults of a valid h are valid.
func TestTimingBounds(t *testing.T) {
	us := time.Microsecond
	for _, tc := range []struct {
		c    Config
		want string // "": valid
	}{
		{Config{HeartbeatPeriod: time.Nanosecond, SuspectTimeout: 2}, "Config.HeartbeatPeriod = 1ns: want 10µs to 1m0s"},
		{Config{HeartbeatPeriod: -time.Second}, "Config.HeartbeatPeriod = -1s"},
		{Config{HeartbeatPeriod: math.MaxInt64}, "Config.HeartbeatPeriod = 2562047h47m16.854775807s"},
		{Config{HeartbeatPeriod: 10 * us}, ""}, // δ defaults to 100µs, not 50µs
		{Config{HeartbeatPeriod: 10 * us, SuspectTimeout: 20 * us}, "Config.SuspectTimeout = 20µs: want 100µs to 1h0m0s"},
		{Config{HeartbeatPeriod: time.Millisecond, SuspectTimeout: 1999 * us}, "Config.SuspectTimeout = 1.999ms: want ≥ 2 × Config.HeartbeatPeriod = 2ms"},
		{Config{HeartbeatPeriod: time.Millisecond, SuspectTimeout: 2 * time.Millisecond}, ""},
		{Config{HeartbeatPeriod: time.Minute, SuspectTimeout: time.Hour}, ""},
		{Config{SuspectTimeout: time.Hour + 1}, "Config.SuspectTimeout = 1h0m0.000000001s"},
		{Config{SuspectTimeout: math.MaxInt64}, "want 100µs to 1h0m0s"},
		{Config{CheckPeriod: time.Second}, "Config.CheckPeriod = 1s: want ≤ Config.SuspectTimeout = 50ms"},
		{Config{CheckPeriod: time.Nanosecond}, "Config.CheckPeriod = 1ns"},
		{Config{StartGrace: -1}, "Config.StartGrace = -1ns"},
		{Config{StartGrace: 3 * time.Hour}, "Config.StartGrace = 3h0m0s: want 0s to 2h0m0s"},
		{Config{HeartbeatPeriod: 40 * us, RealTime: true}, "Config.HeartbeatPeriod = 40µs: want ≥ 50µs with a real-time heartbeat thread (or Config.RealTime off)"},
		{Config{HeartbeatPeriod: 50 * us, RealTime: true}, ""},
		{Config{HeartbeatPeriod: 40 * us}, ""},
	} {
		tc.c.Size = 4
		err := tc.c.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%+v: %v, want valid", tc.c, err)
			}
			continue
		}
		var be *settings.BoundError
		if !errors.As(err, &be) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("h=%v δ=%v check=%v grace=%v: %v, want a *settings.BoundError with %q", tc.c.HeartbeatPeriod, tc.c.SuspectTimeout,
				tc.c.CheckPeriod, tc.c.StartGrace, err, tc.want)
		}
	}
}

// TestBoundErrorNames: a bound error names its setting as each interface
// does.
func TestBoundErrorNames(t *testing.T) {
	err := Config{Size: 1, HeartbeatPeriod: time.Millisecond, SuspectTimeout: time.Millisecond}.Validate()
	var be *settings.BoundError
	if !errors.As(err, &be) {
		t.Fatalf("%v: not a *BoundError", err)
	}
	for n, want := range map[settings.Names]string{
		settings.GoNames:   "Config.SuspectTimeout = 1ms: want ≥ 2 × Config.HeartbeatPeriod = 2ms",
		settings.FlagNames: "-delta 1ms: want ≥ 2 × -h = 2ms",
		settings.EnvNames:  "VIGIL_DELTA=1ms: want ≥ 2 × VIGIL_H = 2ms",
		settings.CNames:    "vigil_config.suspect_ns = 1000000 (1ms): want ≥ 2 × vigil_config.heartbeat_ns = 2ms",
	} {
		if got := be.In(n); got != want {
			t.Errorf("names %d: %q, want %q", n, got, want)
		}
	}
	if got := settings.CheckBound(settings.StartTimeout, -time.Millisecond).(*settings.BoundError).In(settings.CNames); !strings.HasPrefix(got, "vigil_config.start_timeout_ms = -1 (-1ms)") {
		t.Errorf("start time-out: %q", got)
	}
}

// TestGossipBounds: Validate refuses a Gossip value out of
// bcast.GossipConfig's bounds whatever the Broadcast, as a
// *settings.BoundError that each interface names as its own; the zero
// values are the defaults.
func TestGossipBounds(t *testing.T) {
	for _, tc := range []struct {
		g    GossipConfig
		want map[settings.Names]string // nil: valid
	}{
		{GossipConfig{}, nil},
		{GossipConfig{Step: time.Nanosecond, Latency: 65536, T: 1 << 20, C: 1 << 20, F: 3}, nil},
		{GossipConfig{F: 4}, map[settings.Names]string{settings.GoNames: "Config.Gossip.F = 4: want 1 to 3 (0: 1)",
			settings.FlagNames: "-gossip-f 4: want 1 to 3 (0: 1)", settings.EnvNames: "VIGIL_GOSSIP_F=4: want 1 to 3 (0: 1)",
			settings.CNames: "vigil_config.gossip_f = 4: want 1 to 3 (0: 1)"}},
		{GossipConfig{T: -1}, map[settings.Names]string{settings.FlagNames: "-gossip-t -1: want 0 (planned) to 1048576"}},
		{GossipConfig{C: 1<<20 + 1}, map[settings.Names]string{settings.EnvNames: "VIGIL_GOSSIP_C=1048577: want 0 (planned) to 1048576"}},
		{GossipConfig{Step: -time.Microsecond}, map[settings.Names]string{settings.CNames: "vigil_config.gossip_step_ns = -1000 (-1µs): want > 0"}},
		{GossipConfig{Latency: -1}, map[settings.Names]string{settings.FlagNames: "-gossip-latency -1ns: want ≥ 0"}},
		{GossipConfig{Step: time.Nanosecond, Latency: 65537}, map[settings.Names]string{
			settings.FlagNames: "-gossip-latency 65.537µs: want at most 65536 steps of -gossip-step = 1 ns"}},
	} {
		for _, b := range Broadcasts {
			err := Config{Size: 4, Broadcast: b, Gossip: tc.g}.Validate()
			if tc.want == nil {
				if err != nil {
					t.Errorf("%s %+v: %v, want valid", b, tc.g, err)
				}
				continue
			}
			be, ok := errors.AsType[*settings.BoundError](err)
			if !ok {
				t.Errorf("%s %+v: %v, want a *settings.BoundError", b, tc.g, err)
				continue
			}
			for n, want := range tc.want {
				if got := be.In(n); got != want {
					t.Errorf("%s %+v, names %d: %q, want %q", b, tc.g, n, got, want)
				}
			}
		}
	}
}

// TestExtremeDefaults: the defaults of the extreme valid h are valid (no
// overflow).
func TestExtremeDefaults(t *testing.T) {
	for _, h := range []time.Duration{settings.MinHeartbeatPeriod, settings.MaxHeartbeatPeriod} {
		c := Config{Size: 2, HeartbeatPeriod: h}
		if err := c.Validate(); err != nil {
			t.Errorf("h = %v with defaults: %v", h, err)
		}
		d := c.WithDefaults()
		if d.StartGrace <= 0 || d.MendEarly <= 0 || d.CheckPeriod <= 0 {
			t.Errorf("h = %v: defaults %+v", h, d)
		}
	}
	if satAdd(math.MaxInt64-1, 5) != math.MaxInt64 || satMul(math.MaxInt64/2, 3) != math.MaxInt64 || satMul(time.Second, 5) != 5*time.Second {
		t.Error("saturating arithmetic")
	}
}
