package main

import (
	"github.com/vigil-hpc/vigil/bootstrap"
	"github.com/vigil-hpc/vigil/bootstrap/local"
)

// joinBootstrap returns the bootstrap this process was launched with: the
// local launcher's environment (`vigil run`, the demo).
func joinBootstrap() (bootstrap.Bootstrap, error) {
	return local.Join()
}
