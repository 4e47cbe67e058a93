package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/settings"
)

// propagationNames name the propagation settings (node.Config.Broadcast and
// node.Config.Gossip) as the caller gave them, for error messages.
type propagationNames struct {
	broadcast, step, latency, t, c, f string
}

var (
	// configNames are vigil_config's fields (vigil_init).
	configNames = namesIn(settings.CNames)
	// envNames are vigil_init_from_env's variables.
	envNames = namesIn(settings.EnvNames)
)

// namesIn names the propagation settings as interface n does.
func namesIn(n settings.Names) propagationNames {
	return propagationNames{settings.Broadcast.Name(n), settings.GossipStep.Name(n), settings.GossipLatency.Name(n),
		settings.GossipT.Name(n), settings.GossipC.Name(n), settings.GossipF.Name(n)}
}

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

// envPropagation reads VIGIL_BROADCAST and VIGIL_GOSSIP_* into cfg
// (settings.ParseEnv) and checks them (vigil_init_from_env). The
// broadcast is read as text: checkPropagation names the propagations.
func envPropagation(cfg *node.Config) error {
	cfg.Broadcast = os.Getenv(settings.Broadcast.Env)
	for _, b := range []struct {
		s   *settings.Setting
		dst any
	}{
		{settings.GossipStep, &cfg.Gossip.Step}, {settings.GossipLatency, &cfg.Gossip.Latency},
		{settings.GossipT, &cfg.Gossip.T}, {settings.GossipC, &cfg.Gossip.C}, {settings.GossipF, &cfg.Gossip.F},
	} {
		if err := settings.ParseEnv(b.s, os.Getenv, b.dst); err != nil {
			return err
		}
	}
	return checkPropagation(*cfg, envNames)
}
