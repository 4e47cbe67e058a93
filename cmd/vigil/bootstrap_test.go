package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/vigil-hpc/vigil/bootstrap"
	"github.com/vigil-hpc/vigil/bootstrap/pmix"
)

// TestJoinBootstrapSelection checks which launcher joinBootstrap picks from
// the environment, without starting one.
func TestJoinBootstrapSelection(t *testing.T) {
	clear := func() {
		for _, k := range []string{bootstrap.EnvRank, bootstrap.EnvSize, bootstrap.EnvJobID, bootstrap.EnvKey,
			bootstrap.EnvServer, pmix.EnvRank, pmix.EnvNamespace} {
			t.Setenv(k, "")
		}
	}

	clear()
	_, err := joinBootstrap()
	if err == nil || !strings.Contains(err.Error(), "vigil run") || !strings.Contains(err.Error(), "mpirun") {
		t.Errorf("no launcher: %v; want an error naming `vigil run` and mpirun", err)
	}

	// Local launcher variables win over inherited PMIx ones: the local
	// bootstrap is chosen and complains about the missing VIGIL_SIZE.
	clear()
	t.Setenv(bootstrap.EnvServer, "/nonexistent/bootstrap.sock")
	t.Setenv(pmix.EnvRank, "0")
	_, err = joinBootstrap()
	if err == nil || !strings.Contains(err.Error(), bootstrap.EnvSize) {
		t.Errorf("local launcher under PMIx: %v; want the local bootstrap's error about %s", err, bootstrap.EnvSize)
	}

	if !pmix.Available() {
		clear()
		t.Setenv(pmix.EnvNamespace, "ns")
		_, err = joinBootstrap()
		if !errors.Is(err, pmix.ErrNotBuilt) {
			t.Errorf("PMIx environment, no PMIx support: %v; want ErrNotBuilt", err)
		}
	}
}
