//go:build !cgo || novigilverbs

package main

import (
	"errors"
	"log/slog"

	"github.com/vigil-hpc/vigil/bootstrap"
	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/transport"
)

// verbsTransport stands for the verbs transport in a build without it.
type verbsTransport struct{ transport.Transport }

// Slots is never called: openVerbs always fails in this build.
func (*verbsTransport) Slots() *hb.Slots { return nil }

func openVerbs(bootstrap.Bootstrap, *slog.Logger) (*verbsTransport, error) {
	return nil, errors.New("this vigil was built without the verbs transport (CGO_ENABLED=0 or -tags novigilverbs)")
}

func startVerbs(*verbsTransport, func(string) ([]string, error), transport.Handler) error {
	return errors.New("no verbs transport in this build")
}
