package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/node"
)

// propagationNames name the propagation settings (node.Config.Broadcast and
// node.Config.Gossip) as the caller gave them, for error messages.
type propagationNames struct {
	broadcast, step, latency, t, c, f string
}

var (
	// configNames are vigil_config's fields (vigil_init).
	configNames = propagationNames{"vigil_config.broadcast", "vigil_config.gossip_step_ns",
		"vigil_config.gossip_latency_ns", "vigil_config.gossip_t", "vigil_config.gossip_c", "vigil_config.gossip_f"}
	// envNames are vigil_init_from_env's variables.
	envNames = propagationNames{"VIGIL_BROADCAST", "VIGIL_GOSSIP_STEP",
		"VIGIL_GOSSIP_LATENCY", "VIGIL_GOSSIP_T", "VIGIL_GOSSIP_C", "VIGIL_GOSSIP_F"}
)

// checkPropagation checks cfg.Broadcast and cfg.Gossip (zero values: the
// defaults), naming the caller's settings n in its message. The gossip
// values are checked whatever the broadcast, as the agent's flags are; the
// bounds that only bcast.GossipConfig.Validate knows are asked of
// node.Config.Validate one field at a time, so that its message can be
// given the field's name too.
func checkPropagation(cfg node.Config, n propagationNames) error {
	g := cfg.Gossip
	switch {
	case cfg.Broadcast != "" && !slices.Contains(node.Broadcasts, cfg.Broadcast):
		return fmt.Errorf("%s = %q, want one of %s", n.broadcast, cfg.Broadcast, strings.Join(node.Broadcasts, ", "))
	case g.Step < 0:
		return fmt.Errorf("%s = %d ns, want > 0 (0: the default, %v)", n.step, int64(g.Step), node.DefaultGossipStep)
	case g.Latency < 0:
		return fmt.Errorf("%s = %d ns, want >= 0 (0: the default, %v)", n.latency, int64(g.Latency), node.DefaultGossipLatency)
	case g.T < 0:
		return fmt.Errorf("%s = %d, want >= 0 (0: planned)", n.t, g.T)
	case g.C < 0:
		return fmt.Errorf("%s = %d, want >= 0 (0: planned)", n.c, g.C)
	case g.F < 0 || g.F > bcast.MaxF:
		return fmt.Errorf("%s = %d, want 1 to %d (0: 1)", n.f, g.F, bcast.MaxF)
	}
	for _, f := range []struct {
		name string
		g    node.GossipConfig
	}{
		{n.latency, node.GossipConfig{Step: g.Step, Latency: g.Latency}}, // at most 65536 steps
		{n.t, node.GossipConfig{T: g.T}},
		{n.c, node.GossipConfig{C: g.C}},
	} {
		if err := (node.Config{Size: 1, Broadcast: "ocg", Gossip: f.g}).Validate(); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return nil
}

// envPropagation reads VIGIL_BROADCAST and VIGIL_GOSSIP_* into cfg and
// checks them (vigil_init_from_env).
func envPropagation(cfg *node.Config) error {
	cfg.Broadcast = os.Getenv(envNames.broadcast)
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{envNames.step, &cfg.Gossip.Step}, {envNames.latency, &cfg.Gossip.Latency}} {
		if v := os.Getenv(d.name); v != "" {
			x, err := time.ParseDuration(v)
			if err != nil || x < 0 {
				return fmt.Errorf("%s=%q is not a duration such as 100us", d.name, v)
			}
			*d.dst = x
		}
	}
	for _, i := range []struct {
		name string
		dst  *int
	}{{envNames.t, &cfg.Gossip.T}, {envNames.c, &cfg.Gossip.C}, {envNames.f, &cfg.Gossip.F}} {
		if v := os.Getenv(i.name); v != "" {
			x, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%s=%q is not an integer", i.name, v)
			}
			*i.dst = x
		}
	}
	return checkPropagation(*cfg, envNames)
}
