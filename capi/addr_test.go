package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/vigil-hpc/vigil"
	"github.com/vigil-hpc/vigil/transport/netaddr"
)

// TestChooseAddr: the environment's address settings give the listen and
// published addresses, errors name the variable, and a static peer table
// is published as given.
func TestChooseAddr(t *testing.T) {
	t.Setenv(netaddr.EnvBind, "")
	t.Setenv(netaddr.EnvListen, "")
	t.Setenv(netaddr.EnvAdvertise, "")
	t.Setenv(netaddr.EnvExclude, "")
	t.Setenv(netaddr.EnvInclude, "lo")
	inst := &instance{bs: &allgatherBootstrap{}}
	var err error
	if inst.addr, err = netaddr.FromEnv(); err != nil {
		t.Fatal(err)
	}
	if err := inst.chooseAddr(); err != nil {
		t.Fatal(err)
	}
	if pub, err := inst.publish("127.0.0.1:4567"); inst.listen != "127.0.0.1:0" || pub != "127.0.0.1:4567" || err != nil {
		t.Fatalf("VIGIL_IF_INCLUDE=lo: listen %q, publish %q, %v", inst.listen, pub, err)
	}

	t.Setenv(netaddr.EnvInclude, "nosuchif0")
	inst.addr, _ = netaddr.FromEnv()
	if err := inst.chooseAddr(); err == nil || !strings.Contains(err.Error(), netaddr.EnvInclude) {
		t.Fatalf("no interface nosuchif0: got %v, want an error naming %s", err, netaddr.EnvInclude)
	}

	static := &instance{bs: &staticBootstrap{peers: []string{"10.9.9.9:1"}}, listen: "10.9.9.9:1", addr: inst.addr}
	if err := static.chooseAddr(); err != nil {
		t.Fatal(err)
	}
	if pub, _ := static.publish("10.9.9.9:1"); static.listen != "10.9.9.9:1" || pub != "10.9.9.9:1" {
		t.Fatalf("static peers: listen %q, publish %q", static.listen, pub)
	}
}

// failingExchange is a bootstrap whose address exchange fails.
type failingExchange struct{ staticIdentity }

func (*failingExchange) Exchange(context.Context, string) ([]string, error) {
	return nil, errors.New("allgather returned 1")
}

// TestRingJoinCodes: vigil_start's ring mode reports a listen address of no
// interface as VIGIL_ERR_TRANSPORT, a failed exchange and an unusable
// address table as VIGIL_ERR_BOOTSTRAP; with static peers a listen address
// without a host listens on every interface.
func TestRingJoinCodes(t *testing.T) {
	id := staticIdentity{size: 2, jobID: 7, key: make([]byte, 16)}
	for _, tc := range []struct {
		name  string
		inst  *instance
		want  int
		inErr string
	}{
		{"listen address of no interface", &instance{bs: &staticBootstrap{id, []string{"192.0.2.1:0", "127.0.0.1:1"}},
			listen: "192.0.2.1:0", addr: netaddr.Config{Names: netaddr.Names{Bind: "vigil_config.peers[0]"}}}, int(eTransport), "192.0.2.1"},
		{"peer without a port", &instance{bs: &staticBootstrap{id, []string{"127.0.0.1:0", "127.0.0.1"}},
			listen: "127.0.0.1:0"}, int(eBootstrap), "rank 1"},
		{"exchange fails", &instance{bs: &failingExchange{id}, addr: netaddr.Config{Bind: "127.0.0.1:0"}},
			int(eBootstrap), "allgather returned 1"},
	} {
		tc.inst.udpOnly = true
		tc.inst.cfg.Rank, tc.inst.cfg.Size = 0, 2
		d, err := vigil.Join(context.Background(), tc.inst.joinConfig())
		if err == nil {
			d.Close()
			t.Fatalf("%s: joined", tc.name)
		}
		t.Logf("%s: %v", tc.name, err)
		if got := int(joinCode(err)); got != tc.want || !strings.Contains(err.Error(), tc.inErr) {
			t.Errorf("%s: code %d, error %q; want %d, naming %q", tc.name, got, err, tc.want, tc.inErr)
		}
	}
	if a := staticAddresses(":5000", "x"); a.Bind != "[::]:5000" || a.Names.Bind != "x" {
		t.Errorf("staticAddresses(\":5000\") = %+v", a)
	}
}
