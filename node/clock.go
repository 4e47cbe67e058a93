package node

import "golang.org/x/sys/unix"

// mono returns CLOCK_MONOTONIC in nanoseconds. Unlike Go's per-process
// monotonic readings it is comparable across the processes of one machine,
// which the local launcher's timeline relies on.
func mono() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// Mono is mono for other packages (launcher timelines, tests).
func Mono() int64 { return mono() }
