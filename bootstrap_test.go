package vigil_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/vigil-hpc/vigil"
	"github.com/vigil-hpc/vigil/bootstrap"
	"github.com/vigil-hpc/vigil/bootstrap/pmix"
)

// TestFromEnvironment checks which launcher FromEnvironment picks from
// the environment, without starting one.
func TestFromEnvironment(t *testing.T) {
	clear := func() {
		for _, k := range []string{bootstrap.EnvRank, bootstrap.EnvSize, bootstrap.EnvJobID, bootstrap.EnvKey,
			bootstrap.EnvServer, pmix.EnvRank, pmix.EnvNamespace} {
			t.Setenv(k, "")
		}
	}

	clear()
	_, err := vigil.FromEnvironment(context.Background())
	if err == nil || !strings.Contains(err.Error(), "vigil run") || !strings.Contains(err.Error(), "mpirun") {
		t.Errorf("no launcher: %v; want an error naming `vigil run` and mpirun", err)
	}

	// Local launcher variables win over inherited PMIx ones: the local
	// bootstrap is chosen and complains about the missing VIGIL_SIZE.
	clear()
	t.Setenv(bootstrap.EnvServer, "/nonexistent/bootstrap.sock")
	t.Setenv(pmix.EnvRank, "0")
	_, err = vigil.FromEnvironment(context.Background())
	if err == nil || !strings.Contains(err.Error(), bootstrap.EnvSize) {
		t.Errorf("local launcher under PMIx: %v; want the local bootstrap's error about %s", err, bootstrap.EnvSize)
	}

	if !pmix.Available() {
		clear()
		t.Setenv(pmix.EnvNamespace, "ns")
		_, err = vigil.FromEnvironment(context.Background())
		if !errors.Is(err, pmix.ErrNotBuilt) {
			t.Errorf("PMIx environment, no PMIx support: %v; want ErrNotBuilt", err)
		}
	}
}
