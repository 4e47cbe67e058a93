package main

import (
	"strings"
	"testing"

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
