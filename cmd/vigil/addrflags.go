package main

import (
	"context"
	"flag"

	"github.com/vigil-hpc/vigil/bootstrap"
	"github.com/vigil-hpc/vigil/transport/netaddr"
	"github.com/vigil-hpc/vigil/transport/tcp"
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

func (a *addrFlags) config(spans bool) netaddr.Config {
	return netaddr.Config{Bind: a.bind, Advertise: a.advertise, Include: a.include, Exclude: a.exclude,
		SpansHosts: spans, Names: addrFlagNames}
}

func (a *addrFlags) validate() error { return a.config(false).Validate() }

// choose picks the addresses of this rank of bs's job: the job spans hosts
// when the bootstrap says its ranks run on more than one.
func (a *addrFlags) choose(bs bootstrap.Bootstrap) (netaddr.Choice, error) {
	ifs, err := netaddr.Interfaces()
	if err != nil {
		return netaddr.Choice{}, err
	}
	return netaddr.Choose(a.config(netaddr.SpansHosts(bootstrap.Nodes(bs))), ifs)
}

// publishing wraps exchange to publish c's address for the listener's,
// and stores what it published in *published (if not nil).
func publishing(c netaddr.Choice, exchange tcp.Exchanger, published *string) tcp.Exchanger {
	return func(ctx context.Context, addr string) ([]string, error) {
		pub, err := c.Publish(addr)
		if err != nil {
			return nil, err
		}
		if published != nil {
			*published = pub
		}
		return exchange(ctx, pub)
	}
}
