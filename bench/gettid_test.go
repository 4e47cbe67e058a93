package bench

import "golang.org/x/sys/unix"

func unixGettid() int { return unix.Gettid() }
