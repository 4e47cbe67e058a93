package main

import (
	"flag"

	"github.com/vigil-hpc/vigil/settings"
	"github.com/vigil-hpc/vigil/transport/netaddr"
)

// addrFlags are the address settings of agent, run and daemon
// (transport/netaddr).
type addrFlags struct {
	bind, advertise, include, exclude string
}

var addrFlagNames = netaddr.Names{Bind: settings.Bind.Name(settings.FlagNames), Advertise: settings.Advertise.Name(settings.FlagNames),
	Include: settings.IfInclude.Name(settings.FlagNames), Exclude: settings.IfExclude.Name(settings.FlagNames)}

func (a *addrFlags) register(fs *flag.FlagSet) {
	settingVar(fs, "bind", &a.bind)
	settingVar(fs, "advertise", &a.advertise)
	settingVar(fs, "if-include", &a.include)
	settingVar(fs, "if-exclude", &a.exclude)
}

// args renders the flags that are set back for child agents.
func (a *addrFlags) args() []string {
	var out []string
	n := addrFlagNames
	for _, f := range []struct{ name, v string }{{n.Bind, a.bind}, {n.Advertise, a.advertise},
		{n.Include, a.include}, {n.Exclude, a.exclude}} {
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
