//go:build !cgo || !verbs

package vigil

import (
	"errors"
	"log/slog"

	"github.com/vigil-hpc/vigil/bootstrap"
	"github.com/vigil-hpc/vigil/transport"
)

// VerbsBuilt says whether this build has the verbs transport (cgo and -tags verbs).
const VerbsBuilt = false

// HasRDMADevice reports false in a build without verbs.
func HasRDMADevice() bool { return false }

// verbsTransport stands for the verbs transport in a build without it.
type verbsTransport struct{ transport.Transport }

// Slots is never called: openVerbs always fails in this build.
func (*verbsTransport) Slots() *transport.Slots { return nil }

func openVerbs(bootstrap.Bootstrap, *slog.Logger) (*verbsTransport, error) {
	return nil, errors.New("this vigil was built without the verbs transport (build it with cgo and -tags verbs; needs libibverbs-dev)")
}

func startVerbs(*verbsTransport, func(string) ([]string, error), transport.Handler) error {
	return errors.New("no verbs transport in this build")
}
