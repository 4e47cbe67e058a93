package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/vigil-hpc/vigil/bootstrap"
	"github.com/vigil-hpc/vigil/bootstrap/local"
	"github.com/vigil-hpc/vigil/bootstrap/pmix"
)

// joinTimeout bounds the PMIx start-up fence (all ranks must call Join).
const joinTimeout = 60 * time.Second

// joinBootstrap returns the bootstrap this process was launched with:
//
//   - the local launcher (`vigil run`, the demo) when its variables are set
//     (VIGIL_BOOTSTRAP): they are put in each child's environment by its
//     direct parent, so they win over PMIx variables that a `vigil run`
//     started under mpirun passes on to its children;
//   - PMIx when PMIX_RANK or PMIX_NAMESPACE is set (mpirun, srun, prterun);
//     a binary built without `-tags pmix` reports that it lacks PMIx support;
//   - otherwise an error naming both ways to start an agent.
func joinBootstrap() (bootstrap.Bootstrap, error) {
	switch {
	case os.Getenv(bootstrap.EnvServer) != "":
		return local.Join()
	case pmix.Detect():
		ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
		defer cancel()
		c, err := pmix.Join(ctx)
		if err != nil {
			if errors.Is(err, pmix.ErrNotBuilt) {
				return nil, fmt.Errorf("started by a PMIx launcher (%s/%s set), but %w", pmix.EnvRank, pmix.EnvNamespace, err)
			}
			return nil, err
		}
		return c, nil
	}
	return nil, fmt.Errorf("no launcher found: start agents with `vigil run -n N` (local launcher, sets %s) or under a PMIx launcher such as `mpirun -n N vigil agent` (sets %s)",
		bootstrap.EnvServer, pmix.EnvRank)
}
