package vigil

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

// ErrNoLauncher is returned by FromEnvironment when no launcher's
// variables are set.
var ErrNoLauncher = errors.New("no launcher found")

// pmixTimeout bounds the PMIx start-up fence when ctx has no deadline.
const pmixTimeout = 60 * time.Second

// FromEnvironment returns the bootstrap this process was launched with:
//
//   - the local launcher (`vigil run`, the demo) when its variables are set
//     (VIGIL_BOOTSTRAP): they are put in each child's environment by its
//     direct parent, so they win over PMIx variables that a `vigil run`
//     started under mpirun passes on to its children;
//   - PMIx when PMIX_RANK or PMIX_NAMESPACE is set (mpirun, srun, prterun);
//     libpmix is loaded at run time (linked with `-tags pmix`), and a
//     process that cannot load it gets an error saying what to install;
//   - otherwise an error naming both ways to start.
func FromEnvironment(ctx context.Context) (bootstrap.Bootstrap, error) {
	switch {
	case os.Getenv(bootstrap.EnvServer) != "":
		return local.Join()
	case pmix.Detect():
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, pmixTimeout)
			defer cancel()
		}
		c, err := pmix.Join(ctx)
		if err != nil {
			if errors.Is(err, pmix.ErrNotBuilt) || errors.Is(err, pmix.ErrNoLibrary) {
				return nil, fmt.Errorf("started by a PMIx launcher (%s/%s set), but %w", pmix.EnvRank, pmix.EnvNamespace, err)
			}
			return nil, err
		}
		return c, nil
	}
	return nil, fmt.Errorf("%w: start the program with `vigil run -n N -- PROGRAM [ARGS...]` (the local launcher, sets %s) or under a PMIx launcher such as mpirun (sets %s)",
		ErrNoLauncher, bootstrap.EnvServer, pmix.EnvRank)
}

// LocalJob is a job of Size ranks in this process or its children, with
// the local launcher's address exchange: for tests, examples and programs
// that start every rank themselves.
type LocalJob struct {
	srv     *local.Server
	perHost int
}

// NewLocalJob starts the address exchange of a job of size ranks.
func NewLocalJob(size int) (*LocalJob, error) {
	return NewLocalJobHosts(size, 0)
}

// NewLocalJobHosts is NewLocalJob with the ranks pretended to be placed
// perHost per host (rank r on host r/perHost; 0: no hosts): Join then
// gives the detector these host labels, for host-aware block mending in
// one process, as `vigil run -ranks-per-host` does for agents.
func NewLocalJobHosts(size, perHost int) (*LocalJob, error) {
	if perHost < 0 {
		return nil, fmt.Errorf("vigil: %d ranks per host, want ≥ 0", perHost)
	}
	srv, err := local.NewServer(size)
	if err != nil {
		return nil, err
	}
	return &LocalJob{srv: srv, perHost: perHost}, nil
}

// Bootstrap returns rank r's bootstrap (Config.Bootstrap).
func (j *LocalJob) Bootstrap(r int) bootstrap.Bootstrap {
	return local.NewClientHosts(j.srv.Identity(uint32(r)), j.perHost)
}

// Close stops the address exchange.
func (j *LocalJob) Close() error { return j.srv.Close() }
