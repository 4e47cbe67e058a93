package main

import "testing"

// TestMetricsListenAddr: -metrics-addr without a host binds loopback; an
// unspecified host binds every interface and is flagged for the warning;
// a named host is kept.
func TestMetricsListenAddr(t *testing.T) {
	for _, tc := range []struct {
		in, bind string
		all      bool
	}{
		{":9464", "127.0.0.1:9464", false},
		{":0", "127.0.0.1:0", false},
		{"0.0.0.0:9464", "0.0.0.0:9464", true},
		{"[::]:0", "[::]:0", true},
		{"127.0.0.1:0", "127.0.0.1:0", false},
		{"10.1.2.3:9464", "10.1.2.3:9464", false},
		{"node7:9464", "node7:9464", false},
	} {
		if bind, all := metricsListenAddr(tc.in); bind != tc.bind || all != tc.all {
			t.Errorf("%q: bind %q, every interface %v; want %q, %v", tc.in, bind, all, tc.bind, tc.all)
		}
	}
}
