package unixcred

import (
	"net"
	"os"
	"testing"
)

// TestPeer: both ends of a socket pair see this process.
func TestPeer(t *testing.T) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: "@vigil-unixcred-test-" + t.Name(), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.DialUnix("unix", nil, ln.Addr().(*net.UnixAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, conn := range []*net.UnixConn{c, s} {
		cred, err := Peer(conn)
		if err != nil {
			t.Fatal(err)
		}
		if int(cred.Pid) != os.Getpid() || int(cred.Uid) != os.Getuid() {
			t.Fatalf("peer %+v, want pid %d uid %d", cred, os.Getpid(), os.Getuid())
		}
	}
}
