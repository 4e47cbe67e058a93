package main

import (
	"net"

	"github.com/vigil-hpc/vigil/bootstrap"
	"github.com/vigil-hpc/vigil/transport/netaddr"
)

// chooseAddr sets the address to listen on and the function giving the
// address to publish, from inst.addr: the environment's settings
// (netaddr.FromEnv), with vigil_config.listen_addr as the bind address;
// across hosts, the address routing to the other ranks' hosts
// (netaddr.ChooseFor).
// With vigil_config.peers every address is given: this rank listens on
// listen_addr or its own entry and publishes nothing.
func (inst *instance) chooseAddr() error {
	if _, static := inst.bs.(*staticBootstrap); static {
		inst.publish = func(a string) (string, error) { return a, nil }
		return nil
	}
	c, err := netaddr.ChooseFor(inst.addr, bootstrap.Nodes(inst.bs))
	if err != nil {
		return err
	}
	inst.listen, inst.publish = c.Bind, c.Publish
	return nil
}

// staticAddresses are vigil.Join's address settings with vigil_config.peers:
// listen on listen (without a host: on every interface), named name in
// errors. The published address is not used.
func staticAddresses(listen, name string) netaddr.Config {
	if host, port, err := net.SplitHostPort(listen); err == nil && host == "" {
		listen = net.JoinHostPort("::", port)
	}
	return netaddr.Config{Bind: listen, Names: netaddr.Names{Bind: name}}
}
