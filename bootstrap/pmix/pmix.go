// Package pmix is Vigil's PMIx bootstrap: a process started by a PMIx
// launcher (Open MPI's mpirun, Slurm's srun with PMIx, prterun) learns its
// rank, the job size and the node of every rank from the PMIx server, and
// exchanges transport addresses with PMIx_Put, PMIx_Commit, PMIx_Fence
// (with PMIX_COLLECT_DATA) and PMIx_Get. A Client implements
// bootstrap.Bootstrap.
//
// # Build
//
// The PMIx client is cgo code. By default it loads libpmix at run time
// with dlopen (libpmix.so.2, or the path in $VIGIL_LIBPMIX; Debian:
// libpmix2, which Open MPI's packages bring): a plain `go build` works
// under mpirun and srun, and Join returns ErrNoLibrary, saying what to
// install, where the library is missing. With the build tag "pmix" it is
// linked against libpmix instead (Debian: libpmix-dev, found with
// pkg-config):
//
//	go build -tags pmix ./cmd/vigil
//
// Without cgo the package still compiles: Detect, DeriveKey and JobIDOf
// work, and Join returns ErrNotBuilt.
//
// # Identity
//
// The job ID is a 64-bit hash of the PMIx namespace, so every process of
// the job computes the same one without communicating. The job key is
// derived from the namespace and a 32-byte random secret that rank 0
// draws and Puts (scope PMIX_GLOBAL) during Join; every rank Gets it after
// a fence.
//
// # Trust model
//
// The key authenticates Vigil's frames against other jobs and against
// stray or stale processes (a restarted job has a new namespace and a new
// secret). It is not a secret from anyone who can read the job's PMIx
// key-value store: every process of the PMIx job, the PMIx servers (the
// launcher's daemons) and the resource manager can Get it, and so can any
// process able to ptrace a rank (same user, or root). Vigil therefore
// trusts all processes of the job and the launcher, exactly as MPI does.
package pmix

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/vigil-hpc/vigil/bootstrap"
	"github.com/vigil-hpc/vigil/settings"
)

// ErrNotBuilt is returned by Join in a binary built without cgo.
var ErrNotBuilt = errors.New("vigil built without cgo, so without PMIx support (build with CGO_ENABLED=1, and -tags pmix to link libpmix)")

// ErrNoLibrary is returned by Join when libpmix cannot be loaded at run
// time (a build without the "pmix" tag loads it with dlopen); the error
// names the library, why dlopen failed and what to install.
var ErrNoLibrary = errors.New("pmix: cannot load the PMIx library")

// EnvLibrary names the PMIx library to load at run time (default
// libpmix.so.2, found by the dynamic loader).
const EnvLibrary = settings.LibPMIxEnv

// Environment variables a PMIx server sets for the processes it launches.
const (
	EnvRank      = "PMIX_RANK"
	EnvNamespace = "PMIX_NAMESPACE"
)

// Keys this package Puts in the job's PMIx key-value store. The first %d
// is the number of earlier Joins in this process, so that a process that
// joins again (after Close) never reads values cached from its earlier
// incarnation; every rank must join the same number of times.
const (
	keySecret = "vigil.%d.secret"  // rank 0: the job key's secret (byte object)
	keyHost   = "vigil.%d.host"    // every rank: os.Hostname(), the node fallback
	keyAddr   = "vigil.%d.addr.%d" // every rank: its address for exchange round %d
)

// SecretLen is the length of the secret rank 0 draws.
const SecretLen = 32

// Available reports whether this binary was built with PMIx support:
// with cgo (whether libpmix can be loaded is known at Join).
func Available() bool { return available }

// Detect reports whether this process looks like it was started by a PMIx
// launcher: PMIX_RANK or PMIX_NAMESPACE is set.
func Detect() bool {
	return os.Getenv(EnvRank) != "" || os.Getenv(EnvNamespace) != ""
}

// JobIDOf returns the job ID of PMIx namespace nspace: the first 8 bytes
// (little-endian) of SHA-256("vigil-pmix-jobid" ‖ nspace), never zero.
func JobIDOf(nspace string) uint64 {
	h := sha256.Sum256(append([]byte("vigil-pmix-jobid\x00"), nspace...))
	id := binary.LittleEndian.Uint64(h[:8])
	if id == 0 {
		id = 1
	}
	return id
}

// DeriveKey returns the job key for namespace nspace and rank 0's secret:
// SHA-256("vigil-pmix-key" ‖ len(nspace) ‖ nspace ‖ secret), 32 bytes.
func DeriveKey(nspace string, secret []byte) []byte {
	b := append([]byte("vigil-pmix-key\x00"), binary.LittleEndian.AppendUint32(nil, uint32(len(nspace)))...)
	b = append(append(b, nspace...), secret...)
	k := sha256.Sum256(b)
	return k[:]
}

// Error is a failed PMIx call.
type Error struct {
	Op     string // the PMIx call, such as "PMIx_Fence"
	Status int    // its pmix_status_t
	Text   string // PMIx_Error_string(Status)
}

// Error formats the failure as "pmix: Op: Text (Status)".
func (e *Error) Error() string { return fmt.Sprintf("pmix: %s: %s (%d)", e.Op, e.Text, e.Status) }

// Client is one process's PMIx bootstrap. Its methods are safe for
// concurrent use; Exchange calls are serialized.
type Client struct {
	rank   uint32
	size   int
	nspace string
	jobID  uint64
	key    []byte
	nodes  []string

	mu     sync.Mutex
	join   int64 // this Join's number, in every key name
	round  int   // exchanges done, names the next round's key
	broken error // a fence that did not complete: the store is out of step
	closed bool
}

var _ bootstrap.Bootstrap = (*Client)(nil)

// Join initializes PMIx (PMIx_Init), reads the job size and the node of
// every rank, and distributes the job key: rank 0 Puts a fresh secret,
// every rank Puts its host name, and all ranks fence once. Every rank of
// the job must call Join. ctx bounds the fence (it is passed to the PMIx
// server as PMIX_TIMEOUT when it has a deadline).
func Join(ctx context.Context) (*Client, error) {
	if !available {
		return nil, ErrNotBuilt
	}
	return join(ctx)
}

// Rank implements bootstrap.Bootstrap.
func (c *Client) Rank() uint32 { return c.rank }

// Size implements bootstrap.Bootstrap.
func (c *Client) Size() int { return c.size }

// JobID implements bootstrap.Bootstrap: JobIDOf(Namespace()).
func (c *Client) JobID() uint64 { return c.jobID }

// Key implements bootstrap.Bootstrap: DeriveKey(Namespace(), rank 0's secret).
func (c *Client) Key() []byte { return c.key }

// Namespace returns the PMIx namespace of the job.
func (c *Client) Namespace() string { return c.nspace }

// Node returns the node rank r runs on: its PMIX_HOSTNAME, or the host name
// it published during Join when the server does not provide one.
func (c *Client) Node(r uint32) string {
	if int(r) >= len(c.nodes) {
		return ""
	}
	return c.nodes[r]
}

// Nodes returns the node of every rank, indexed by rank.
func (c *Client) Nodes() []string { return append([]string(nil), c.nodes...) }

// Exchange implements bootstrap.Bootstrap: Put this rank's address under a
// per-round key, Commit, Fence with PMIX_COLLECT_DATA over the whole job and
// Get every rank's address. If ctx ends first, Exchange returns its error
// and the Client cannot exchange again (the fence may still complete).
func (c *Client) Exchange(ctx context.Context, addr string) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return nil, errors.New("pmix: Exchange after Close")
	case c.broken != nil:
		return nil, c.broken
	}
	key := fmt.Sprintf(keyAddr, c.join, c.round)
	c.round++
	return c.exchange(ctx, key, addr)
}

// Close implements bootstrap.Bootstrap: PMIx_Finalize. Later calls do
// nothing.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return c.finalize()
}
