package main

import (
	"slices"
	"testing"

	"github.com/vigil-hpc/vigil/bootstrap"
	"github.com/vigil-hpc/vigil/bootstrap/local"
)

// TestJoinConfigHosts: the ring mode gives vigil.Join the host of every
// rank its bootstrap knows (the hosts vigil_start gathered through the
// allgather, the local launcher's pretended hosts), for host-aware block
// mending; with static peers there are none.
func TestJoinConfigHosts(t *testing.T) {
	id := staticIdentity{size: 4, jobID: 7, key: make([]byte, 16)}
	nodes := []string{"a/net:[1]", "a/net:[1]", "b/net:[2]", "b/net:[2]"}
	for _, tc := range []struct {
		name string
		bs   bootstrap.Bootstrap
		want []string
	}{
		{"allgather", &allgatherBootstrap{staticIdentity: id, nodes: nodes}, nodes},
		{"allgather before vigil_start", &allgatherBootstrap{staticIdentity: id}, nil},
		{"local launcher, 2 ranks per host", local.NewClientHosts(bootstrap.Identity{Size: 4}, 2), []string{"host0", "host0", "host1", "host1"}},
		{"static peers", &staticBootstrap{staticIdentity: id, peers: make([]string, 4)}, nil},
	} {
		inst := &instance{bs: tc.bs}
		if got := inst.joinConfig().Hosts; !slices.Equal(got, tc.want) {
			t.Errorf("%s: hosts %q, want %q", tc.name, got, tc.want)
		}
	}
}
