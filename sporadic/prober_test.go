package sporadic_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/sporadic"
)

var key = []byte("0123456789abcdef0123456789abcdef")

func listen(t *testing.T, rank uint32, job uint64, k []byte) *sporadic.Prober {
	t.Helper()
	p, err := sporadic.Listen("127.0.0.1:0", rank, job, k)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A live peer answers; a closed one, another job's and a wrongly keyed
// one count as dead, each with an error that says why.
func TestProbe(t *testing.T) {
	a, b := listen(t, 0, 7, key), listen(t, 1, 7, key)
	defer a.Close()
	other := listen(t, 2, 8, key)                                         // another job
	forged := listen(t, 3, 7, []byte("fedcba9876543210fedcba9876543210")) // another key
	defer other.Close()
	defer forged.Close()
	a.SetPeers([]string{a.Addr(), b.Addr(), other.Addr(), forged.Addr()})

	if err := a.Probe(1, time.Second); err != nil {
		t.Fatalf("live peer: %v", err)
	}
	if err := a.Probe(0, time.Second); err != nil {
		t.Fatalf("itself: %v", err)
	}
	if err := a.Probe(2, 300*time.Millisecond); err == nil {
		t.Fatal("another job's prober answered")
	}
	if err := a.Probe(3, time.Second); err == nil || !strings.Contains(err.Error(), "wrong authenticator") {
		t.Fatalf("wrong key: %v", err)
	}
	b.Close()
	if err := a.Probe(1, time.Second); err == nil {
		t.Fatal("a closed peer answered")
	}
	if err := a.Probe(9, time.Second); err == nil || !strings.Contains(err.Error(), "no address for rank 9") {
		t.Fatalf("unknown rank: %v", err)
	}
}

func TestListenRejectsShortKey(t *testing.T) {
	if _, err := sporadic.Listen("127.0.0.1:0", 0, 1, []byte("short")); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
}

// TestIdleStrangersDoNotSilenceAPeer: 500 idle connections to a prober
// (strangers who send no request) hold at most 64 of its connections, the
// oldest closed first, and a probe amid them is answered.
func TestIdleStrangersDoNotSilenceAPeer(t *testing.T) {
	a, b := listen(t, 0, 7, key), listen(t, 1, 7, key)
	defer a.Close()
	defer b.Close()
	a.SetPeers([]string{a.Addr(), b.Addr()})
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range 500 {
		c, err := net.Dial("tcp", b.Addr())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if i == 250 {
			if err := a.Probe(1, 2*time.Second); err != nil {
				t.Fatalf("probe amid idle strangers: %v", err)
			}
		}
	}
	if err := a.Probe(1, 2*time.Second); err != nil {
		t.Fatalf("probe after 500 idle strangers: %v", err)
	}
	closed := 0
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil {
			if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
				closed++
			}
		}
	}
	if open := len(conns) - closed; open > 64 {
		t.Errorf("%d idle connections still open, want at most 64", open)
	}
}
