package main

import (
	"flag"

	"github.com/vigil-hpc/vigil/transport/netaddr"
)

// addrFlags are the address settings of agent, run and daemon
// (transport/netaddr).
type addrFlags struct {
	bind, advertise, include, exclude string
}

var addrFlagNames = netaddr.Names{Bind: "-bind", Advertise: "-advertise", Include: "-if-include", Exclude: "-if-exclude"}

func (a *addrFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.bind, "bind", "", "address to listen on: ip, ip:port or :port (default: the published address)")
	fs.StringVar(&a.advertise, "advertise", "", "address published to the other ranks: ip or ip:port (default: chosen from the interfaces: loopback when the job runs on one host)")
	fs.StringVar(&a.include, "if-include", "", "interfaces and subnets to choose the published address from, such as ib0,10.1.0.0/16 (like Open MPI's oob_tcp_if_include)")
	fs.StringVar(&a.exclude, "if-exclude", "", "interfaces and subnets never to publish (like oob_tcp_if_exclude)")
}

// args renders the flags that are set back for child agents.
func (a *addrFlags) args() []string {
	var out []string
	for _, f := range []struct{ name, v string }{{"-bind", a.bind}, {"-advertise", a.advertise},
		{"-if-include", a.include}, {"-if-exclude", a.exclude}} {
		if f.v != "" {
			out = append(out, f.name, f.v)
		}
	}
	return out
}

func (a *addrFlags) config() netaddr.Config {
	return netaddr.Config{Bind: a.bind, Advertise: a.advertise, Include: a.include, Exclude: a.exclude,
		Names: addrFlagNames}
}

func (a *addrFlags) validate() error { return a.config().Validate() }
