package netaddr

import (
	"os"

	table "github.com/vigil-hpc/vigil/settings"
)

// Environment variables holding the settings of processes configured
// through their environment (libvigil's vigil_init_from_env and vigil_init,
// the PMPI library).
const (
	EnvBind      = table.BindEnv
	EnvListen    = table.ListenEnv // the older name of VIGIL_BIND
	EnvAdvertise = table.AdvertiseEnv
	EnvInclude   = table.IfIncludeEnv
	EnvExclude   = table.IfExcludeEnv
)

// EnvNames names the settings after their environment variables.
var EnvNames = Names{Bind: EnvBind, Advertise: EnvAdvertise, Include: EnvInclude, Exclude: EnvExclude}

// FromEnv reads the settings from the environment, with EnvNames as their
// names. VIGIL_LISTEN is read when VIGIL_BIND is not set; both set to
// different values is an error.
func FromEnv() (Config, error) {
	c := Config{
		Bind:      os.Getenv(EnvBind),
		Advertise: os.Getenv(EnvAdvertise),
		Include:   os.Getenv(EnvInclude),
		Exclude:   os.Getenv(EnvExclude),
		Names:     EnvNames,
	}
	if l := os.Getenv(EnvListen); l != "" {
		if c.Bind != "" && c.Bind != l {
			return Config{}, errorf(EnvBind, "%s=%q and %s=%q differ: set one of them", EnvBind, c.Bind, EnvListen, l)
		}
		c.Bind = l
	}
	return c, nil
}
