package netaddr

import "testing"

func TestSpansHosts(t *testing.T) {
	for _, tc := range []struct {
		nodes []string
		want  bool
	}{
		{nil, false},
		{[]string{"n1"}, false},
		{[]string{"n1", "n1", "n1"}, false},
		{[]string{"", "n1", ""}, false},
		{[]string{"n1", "n1", "n2"}, true},
		{[]string{"", "n1", "n2"}, true},
	} {
		if got := SpansHosts(tc.nodes); got != tc.want {
			t.Errorf("SpansHosts(%q) = %v, want %v", tc.nodes, got, tc.want)
		}
	}
}
