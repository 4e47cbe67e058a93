package netaddr

import (
	"strings"
	"testing"
)

func TestFromEnv(t *testing.T) {
	t.Setenv(EnvBind, "")
	t.Setenv(EnvListen, "10.1.0.5:7000")
	t.Setenv(EnvAdvertise, "203.0.113.7")
	t.Setenv(EnvInclude, "ib0")
	t.Setenv(EnvExclude, "eth0")
	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.Bind != "10.1.0.5:7000" || c.Advertise != "203.0.113.7" || c.Include != "ib0" || c.Exclude != "eth0" || c.Names != EnvNames {
		t.Fatalf("FromEnv = %+v", c)
	}
	t.Setenv(EnvBind, "10.1.0.5:7000") // the same value under both names
	if _, err := FromEnv(); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvBind, "10.1.0.6")
	if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), EnvListen) {
		t.Fatalf("VIGIL_BIND and VIGIL_LISTEN differ: got %v", err)
	}
	t.Setenv(EnvBind, "")
	t.Setenv(EnvListen, "")
	t.Setenv(EnvInclude, "ib0,10.0.0.0/99")
	c, _ = FromEnv()
	if _, err := Choose(c, cluster); err == nil || !strings.Contains(err.Error(), EnvInclude) {
		t.Fatalf("a bad %s: got %v, want an error naming it", EnvInclude, err)
	}
}
