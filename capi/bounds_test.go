package main

import (
	"strings"
	"testing"
)

// TestEnvTimingBounds: vigil_init_from_env's variables have the bounds of
// the flags and of node.Config (the settings table), named as variables, and are
// refused before a launcher is looked for.
func TestEnvTimingBounds(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string // "" : accepted
	}{
		{map[string]string{"VIGIL_H": "1ns"}, "VIGIL_H=1ns: want 10µs to 1m0s"},
		{map[string]string{"VIGIL_H": "1ns", "VIGIL_DELTA": "2ns"}, "VIGIL_H=1ns"},
		{map[string]string{"VIGIL_H": "-1s"}, "VIGIL_H=-1s: want 10µs to 1m0s"},
		{map[string]string{"VIGIL_H": "2h"}, "VIGIL_H=2h0m0s: want 10µs to 1m0s"},
		{map[string]string{"VIGIL_H": "1ms", "VIGIL_DELTA": "1500us"}, "VIGIL_DELTA=1.5ms: want ≥ 2 × VIGIL_H = 2ms"},
		{map[string]string{"VIGIL_DELTA": "50us"}, "VIGIL_DELTA=50µs: want 100µs to 1h0m0s"},
		{map[string]string{"VIGIL_H": "10ms", "VIGIL_CHECK": "1s"}, "VIGIL_CHECK=1s: want ≤ VIGIL_DELTA = 50ms"},
		{map[string]string{"VIGIL_GRACE": "-1s"}, "VIGIL_GRACE=-1s"},
		{map[string]string{"VIGIL_H": "20us", "VIGIL_REALTIME": "1"}, "VIGIL_H=20µs: want ≥ 50µs with a real-time heartbeat thread (or VIGIL_REALTIME off)"},
		{map[string]string{"VIGIL_START_TIMEOUT": "-5s"}, "VIGIL_START_TIMEOUT=-5s"},
		{map[string]string{"VIGIL_H": "20us"}, ""},
		{map[string]string{"VIGIL_H": "1ms", "VIGIL_DELTA": "2ms"}, ""},
	} {
		for _, v := range []string{"VIGIL_H", "VIGIL_DELTA", "VIGIL_CHECK", "VIGIL_GRACE", "VIGIL_REALTIME", "VIGIL_START_TIMEOUT"} {
			t.Setenv(v, tc.env[v])
		}
		err := envSettings(&instance{})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v, want accepted", tc.env, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: %v, want an error with %q", tc.env, err, tc.want)
		}
	}
}
