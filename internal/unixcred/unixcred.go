// Package unixcred reads the credentials of the process at the other end
// of a Unix socket (SO_PEERCRED).
package unixcred

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// Peer returns the pid, uid and gid of the process that connected c (or
// that c connected to), as the kernel recorded them at connect time.
func Peer(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, fmt.Errorf("SO_PEERCRED: %w", cerr)
	}
	return cred, nil
}
