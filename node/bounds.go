package node

import (
	"fmt"
	"math"
	"time"
)

// Setting is one timing setting of the detector under its name in every
// interface that has it ("" where an interface does not), with its
// documented bounds. Settings lists them all: the CLI flags (cmd/vigil),
// the environment and C ABI (capi) and Config name their errors from it,
// and docs/configuration-bounds.md lists it.
type Setting struct {
	Title string // what it is, for the docs
	Field string // the Go field (node.Config, vigil.Config)
	Flag  string // the vigil command-line flag, without the dash
	Env   string // vigil_init_from_env's environment variable
	C     string // vigil_config's field (nanoseconds unless CMillis)
	// CMillis: the C field is in milliseconds.
	CMillis bool
	// Bool: an on/off setting, not a duration (Min and Max unused).
	Bool bool
	// Min and Max bound an explicit value (0 takes Default). A bound that
	// depends on another setting (δ ≥ 2 × h) is in Rule.
	Min, Max time.Duration
	// Default describes the value 0 stands for.
	Default string
	// Rule states the bounds that depend on other settings, for the docs.
	Rule string
}

// The timing settings.
var (
	SettingH = &Setting{Title: "h, heartbeat period", Field: "HeartbeatPeriod", Flag: "h", Env: "VIGIL_H", C: "heartbeat_ns",
		Min: MinHeartbeatPeriod, Max: MaxHeartbeatPeriod, Default: "10ms",
		Rule: fmt.Sprintf("≥ %v when the heartbeat thread is real-time", RealTimeMinPeriod)}
	SettingDelta = &Setting{Title: "δ, suspicion time-out", Field: "SuspectTimeout", Flag: "delta", Env: "VIGIL_DELTA", C: "suspect_ns",
		Min: MinSuspectTimeout, Max: MaxSuspectTimeout, Default: "max(5 × h, 100µs)", Rule: "≥ 2 × h"}
	SettingCheck = &Setting{Title: "observer check period", Field: "CheckPeriod", Flag: "check", Env: "VIGIL_CHECK", C: "check_ns",
		Min: MinHeartbeatPeriod, Max: MaxSuspectTimeout, Default: "max(δ/8, h)", Rule: "≤ δ"}
	SettingGrace = &Setting{Title: "start-up grace", Field: "StartGrace", Flag: "grace", Env: "VIGIL_GRACE", C: "grace_ns",
		Min: 0, Max: MaxStartGrace, Default: "2s + δ"}
	// SettingRealTime is the real-time heartbeat thread (a flag: it has
	// no bounds, but h has a floor with it).
	SettingRealTime = &Setting{Title: "real-time heartbeat thread", Field: "RealTime", Flag: "realtime", Env: "VIGIL_REALTIME", C: "realtime", Bool: true,
		Default: "off (the vigil command: on)"}
	// SettingStartTimeout bounds the C library's vigil_start exchange.
	SettingStartTimeout = &Setting{Title: "start time-out (C library)", Env: "VIGIL_START_TIMEOUT", C: "start_timeout_ms", CMillis: true,
		Min: 0, Max: MaxStartTimeout, Default: "60s"}
	// SettingRunFor is `vigil run -t`: how long the job runs.
	SettingRunFor = &Setting{Title: "job duration (`vigil run`)", Flag: "t", Min: 0, Max: math.MaxInt64, Default: "until interrupted"}
)

// Settings lists every timing setting, in documentation order.
var Settings = []*Setting{SettingH, SettingDelta, SettingCheck, SettingGrace, SettingRealTime, SettingStartTimeout, SettingRunFor}

// Bounds of the timing settings.
const (
	// MinHeartbeatPeriod is the shortest h (and check period): below it the
	// heartbeat thread would spend its CPU waking up.
	MinHeartbeatPeriod = 10 * time.Microsecond
	// MaxHeartbeatPeriod is the longest h.
	MaxHeartbeatPeriod = time.Minute
	// MinSuspectTimeout is the shortest δ (which must also be ≥ 2h).
	MinSuspectTimeout = 100 * time.Microsecond
	// MaxSuspectTimeout is the longest δ (and check period).
	MaxSuspectTimeout = time.Hour
	// MaxStartGrace is the longest start-up grace (above the default's
	// largest, 2s + MaxSuspectTimeout).
	MaxStartGrace = 2 * time.Hour
	// MaxStartTimeout is the longest bound on the C library's start.
	MaxStartTimeout = time.Hour
	// RealTimeMinPeriod is the shortest h for which a real-time heartbeat
	// thread is accepted (RealTime): a SCHED_FIFO thread waking faster
	// would starve the CPU it runs on.
	RealTimeMinPeriod = 50 * time.Microsecond
)

// Names selects an interface's names for the settings.
type Names int

// The interfaces.
const (
	GoNames   Names = iota // Config.HeartbeatPeriod = 1ns
	FlagNames              // -h 1ns
	EnvNames               // VIGIL_H=1ns
	CNames                 // vigil_config.heartbeat_ns = 1
)

// Name is s's name in interface n.
func (s *Setting) Name(n Names) string {
	switch n {
	case FlagNames:
		return "-" + s.Flag
	case EnvNames:
		return s.Env
	case CNames:
		return "vigil_config." + s.C
	}
	return "Config." + s.Field
}

// show renders v as interface n writes it.
func (s *Setting) show(n Names, v time.Duration) string {
	switch n {
	case FlagNames:
		return s.Name(n) + " " + v.String()
	case EnvNames:
		return s.Name(n) + "=" + v.String()
	case CNames:
		if s.CMillis {
			return fmt.Sprintf("%s = %d (%v)", s.Name(n), v/time.Millisecond, v)
		}
		return fmt.Sprintf("%s = %d (%v)", s.Name(n), int64(v), v)
	}
	return s.Name(n) + " = " + v.String()
}

// BoundError is a timing setting out of its bounds. Its Error names the
// Go field; In names the setting as another interface does.
type BoundError struct {
	Setting *Setting
	Value   time.Duration
	// Want is the bound, Other the setting it refers to (nil if none),
	// written where Want has %s.
	Want  string
	Other *Setting
}

// In is the error's text with the names of interface n.
func (e *BoundError) In(n Names) string {
	want := e.Want
	if e.Other != nil {
		want = fmt.Sprintf(want, e.Other.Name(n))
	}
	return e.Setting.show(n, e.Value) + ": want " + want
}

// Error implements error, with the Go field's name.
func (e *BoundError) Error() string { return "node: " + e.In(GoNames) }

// CheckBound checks an explicit value v of s against s's own bounds
// (not the ones that depend on other settings); 0 is the default and
// passes.
func CheckBound(s *Setting, v time.Duration) error {
	if v == 0 || (v >= s.Min && v <= s.Max) {
		return nil
	}
	if s.Max == math.MaxInt64 {
		return &BoundError{Setting: s, Value: v, Want: fmt.Sprintf("≥ %v (0: %s)", s.Min, s.Default)}
	}
	return &BoundError{Setting: s, Value: v, Want: fmt.Sprintf("%v to %v (0: %s)", s.Min, s.Max, s.Default)}
}

// checkTiming checks the timing of c, whose defaults are applied, against
// the bounds. raw is c before the defaults: its zero fields are defaults.
func checkTiming(raw, c Config) error {
	for _, f := range []struct {
		s *Setting
		v time.Duration
	}{{SettingH, raw.HeartbeatPeriod}, {SettingDelta, raw.SuspectTimeout}, {SettingCheck, raw.CheckPeriod},
		{SettingGrace, raw.StartGrace}} {
		if err := CheckBound(f.s, f.v); err != nil {
			return err
		}
	}
	h, delta := c.HeartbeatPeriod, c.SuspectTimeout
	switch {
	case c.RealTime && h < RealTimeMinPeriod:
		return &BoundError{Setting: SettingH, Value: h,
			Want: fmt.Sprintf("≥ %v with a real-time heartbeat thread (or %%s off)", RealTimeMinPeriod), Other: SettingRealTime}
	case delta < 2*h: // h ≤ 1 min: no overflow
		return &BoundError{Setting: SettingDelta, Value: delta, Want: "≥ 2 × %s = " + (2 * h).String(), Other: SettingH}
	case c.CheckPeriod > delta:
		return &BoundError{Setting: SettingCheck, Value: c.CheckPeriod, Want: "≤ %s = " + delta.String(), Other: SettingDelta}
	}
	return nil
}

// satAdd is a + b, saturated at the largest Duration.
func satAdd(a, b time.Duration) time.Duration {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// satMul is d × k for k > 0, saturated at the largest Duration.
func satMul(d time.Duration, k int64) time.Duration {
	if d > math.MaxInt64/time.Duration(k) {
		return math.MaxInt64
	}
	return d * time.Duration(k)
}
