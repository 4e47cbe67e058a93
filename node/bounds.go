package node

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/settings"
)

// checkTiming checks the timing of c, whose defaults are applied, against
// the bounds of the settings table: every bounded duration of node.Config
// in settings.All against its own bounds, then the bounds between
// settings. raw is c before the defaults: its zero fields are defaults.
func checkTiming(raw, c Config) error {
	rv := reflect.ValueOf(raw)
	for _, s := range settings.All {
		if s.Kind != settings.Duration || !s.Bounded() || len(s.Go) == 0 {
			continue
		}
		f, ok := strings.CutPrefix(s.Go[0], "node.Config.")
		if !ok {
			continue
		}
		if err := settings.CheckBound(s, time.Duration(rv.FieldByName(f).Int())); err != nil {
			return err
		}
	}
	h, delta := c.HeartbeatPeriod, c.SuspectTimeout
	switch {
	case c.RealTime && h < settings.RealTimeMinPeriod:
		return &settings.BoundError{Setting: settings.H, Value: h,
			Want: fmt.Sprintf("≥ %v with a real-time heartbeat thread (or %%s off)", settings.RealTimeMinPeriod), Other: settings.RealTime}
	case delta < 2*h: // h ≤ 1 min: no overflow
		return &settings.BoundError{Setting: settings.Delta, Value: delta, Want: "≥ 2 × %s = " + (2 * h).String(), Other: settings.H}
	case c.CheckPeriod > delta:
		return &settings.BoundError{Setting: settings.Check, Value: c.CheckPeriod, Want: "≤ %s = " + delta.String(), Other: settings.Delta}
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
