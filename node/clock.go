package node

import monoclock "github.com/vigil-hpc/vigil/internal/mono"

// mono returns CLOCK_MONOTONIC in nanoseconds, read on the vDSO. Unlike Go's
// per-process monotonic readings it is comparable across the processes of
// one machine, which the local launcher's timeline relies on.
func mono() int64 { return monoclock.Now() }

// Mono is mono for other packages (launcher timelines, tests).
func Mono() int64 { return mono() }
