//go:build cgo && verbs

package vigil

import (
	"errors"
	"log/slog"
	"os"

	"github.com/vigil-hpc/vigil/bootstrap"
	"github.com/vigil-hpc/vigil/settings"
	"github.com/vigil-hpc/vigil/transport"
	vtr "github.com/vigil-hpc/vigil/transport/verbs"
	"github.com/vigil-hpc/vigil/verbs"
)

// VerbsBuilt says whether this build has the verbs transport (cgo and -tags verbs).
const VerbsBuilt = true

// HasRDMADevice reports whether the machine has any RDMA device.
func HasRDMADevice() bool {
	_, err := verbs.Devices()
	return !errors.Is(err, verbs.ErrNoDevice)
}

// verbsTransport is an opened verbs transport waiting for the address
// exchange.
type verbsTransport = vtr.Transport

// openVerbs opens the verbs transport on the device named by
// VIGIL_VERBS_DEVICE (default: the one carrying VIGIL_VERBS_NETDEV if set,
// else the first), restricted to the GIDs of VIGIL_VERBS_NETDEV if set. The error says why verbs cannot be used.
func openVerbs(bs bootstrap.Bootstrap, logger *slog.Logger) (*verbsTransport, error) {
	return vtr.Open(vtr.Config{Self: bs.Rank(), N: bs.Size(), JobID: bs.JobID(), Key: bs.Key(),
		Device: os.Getenv(settings.VerbsDeviceEnv), Netdev: os.Getenv(settings.VerbsNetdevEnv), Logger: logger})
}

// startVerbs publishes vt's address, and starts it with every rank's.
func startVerbs(vt *verbsTransport, exchange func(string) ([]string, error), h transport.Handler) error {
	addrs, err := exchange(vt.Addr())
	if err == nil {
		err = vt.Start(addrs, h)
	}
	return err
}

// VerbsStats returns the verbs transport's own counters (RDMA heartbeat
// writes and their errors, UD fallbacks, a failure) and true when the
// detector runs over verbs. Only in builds with the verbs transport.
func (d *Detector) VerbsStats() (vtr.VerbsStats, bool) {
	if d.verbs == nil {
		return vtr.VerbsStats{}, false
	}
	return d.verbs.VerbsStats(), true
}
