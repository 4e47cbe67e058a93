// Package bootstrap tells a Vigil process who it is (rank, size, job) and
// exchanges the transport addresses of all ranks: the job-wide fence every
// launcher provides. The local launcher (bootstrap/local) is the embedded
// default on one machine; PMIx (mpirun, srun, prterun) plugs in behind the
// same interface.
package bootstrap

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"

	"github.com/vigil-hpc/vigil/settings"
)

// Bootstrap is one process's view of the job.
type Bootstrap interface {
	// Rank and Size identify this process in the job.
	Rank() uint32
	Size() int
	// JobID and Key identify and authenticate the job's traffic.
	JobID() uint64
	Key() []byte
	// Exchange publishes this rank's address and returns every rank's
	// address, indexed by rank, once all ranks have published (a fence).
	// A detector exchanges twice: its transport's addresses, then an
	// empty one once its heartbeat thread runs (the start fence, from
	// which the start-up grace counts). Each call is a fence of its own.
	Exchange(ctx context.Context, addr string) ([]string, error)
	// Close releases the bootstrap's resources.
	Close() error
}

// Environment variables set by the local launcher for its children.
const (
	EnvRank   = settings.RankEnv
	EnvSize   = settings.SizeEnv
	EnvJobID  = settings.JobIDEnv
	EnvKey    = settings.KeyEnv // hex
	EnvServer = settings.BootstrapEnv
	// EnvRanksPerHost, when set to k > 0, pretends that the local
	// launcher's ranks are placed k per host (rank r on host r/k): the
	// detector's host-aware mending then runs on one machine
	// (`vigil run -ranks-per-host k`; bootstrap/local's Client.Hosts).
	EnvRanksPerHost = settings.RanksPerHostEnv
)

// Identity is rank, size, job ID and key parsed from the environment.
type Identity struct {
	Rank   uint32
	Size   int
	JobID  uint64
	Key    []byte
	Server string
}

// IdentityFromEnv reads and validates the launcher's variables; errors name
// the variable.
func IdentityFromEnv() (Identity, error) {
	var id Identity
	get := func(name string) (string, error) {
		v, ok := os.LookupEnv(name)
		if !ok || v == "" {
			return "", fmt.Errorf("bootstrap: %s is not set (start the process with `vigil run`, or under mpirun for PMIx)", name)
		}
		return v, nil
	}
	v, err := get(EnvSize)
	if err != nil {
		return id, err
	}
	size, err := strconv.Atoi(v)
	if err != nil || size < 1 {
		return id, fmt.Errorf("bootstrap: %s=%q is not a positive integer", EnvSize, v)
	}
	id.Size = size
	if v, err = get(EnvRank); err != nil {
		return id, err
	}
	rank, err := strconv.ParseUint(v, 10, 32)
	if err != nil || int(rank) >= size {
		return id, fmt.Errorf("bootstrap: %s=%q is not a rank below %s=%d", EnvRank, v, EnvSize, size)
	}
	id.Rank = uint32(rank)
	if v, err = get(EnvJobID); err != nil {
		return id, err
	}
	if id.JobID, err = strconv.ParseUint(v, 16, 64); err != nil {
		return id, fmt.Errorf("bootstrap: %s=%q is not a hexadecimal job ID", EnvJobID, v)
	}
	if v, err = get(EnvKey); err != nil {
		return id, err
	}
	if id.Key, err = hex.DecodeString(v); err != nil || len(id.Key) < 16 {
		return id, fmt.Errorf("bootstrap: %s is not a hex key of at least 16 bytes", EnvKey)
	}
	if id.Server, err = get(EnvServer); err != nil {
		return id, err
	}
	return id, nil
}

// Env returns the variables that IdentityFromEnv reads, as KEY=VALUE.
func (id Identity) Env() []string {
	return []string{
		EnvRank + "=" + strconv.FormatUint(uint64(id.Rank), 10),
		EnvSize + "=" + strconv.Itoa(id.Size),
		EnvJobID + "=" + strconv.FormatUint(id.JobID, 16),
		EnvKey + "=" + hex.EncodeToString(id.Key),
		EnvServer + "=" + id.Server,
	}
}
