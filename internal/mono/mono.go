// Package mono reads CLOCK_MONOTONIC through the vDSO, without a system
// call. Unlike Go's per-process monotonic readings, its values are
// comparable across the processes of one machine (the launcher's timelines
// rely on it).
package mono

import (
	_ "unsafe" // go:linkname
)

// nanotime is the Go runtime's CLOCK_MONOTONIC reading (vDSO
// clock_gettime on Linux).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// Now returns CLOCK_MONOTONIC in nanoseconds.
func Now() int64 { return nanotime() }
