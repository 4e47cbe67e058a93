package local

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/bootstrap"
)

// newJob returns a server for a job of n ranks and a context of 10 s, both
// ended with the test.
func newJob(t *testing.T, n int) (*Server, context.Context) {
	t.Helper()
	srv, err := NewServer(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return srv, ctx
}

func TestExchange(t *testing.T) {
	srv, ctx := newJob(t, 3)
	type res struct {
		addrs []string
		err   error
	}
	out := make(chan res, 3)
	for r := uint32(0); r < 3; r++ {
		go func() {
			a, err := NewClient(srv.Identity(r)).Exchange(ctx, "addr-"+string(rune('a'+r)))
			out <- res{a, err}
		}()
	}
	for i := 0; i < 3; i++ {
		r := <-out
		if r.err != nil {
			t.Fatal(r.err)
		}
		if strings.Join(r.addrs, ",") != "addr-a,addr-b,addr-c" {
			t.Fatalf("table %v", r.addrs)
		}
	}
	<-srv.Done()
}

// Each Exchange of a client is a round of its own: a fence that no rank
// passes until every rank has joined it, with its own table.
func TestExchangeRounds(t *testing.T) {
	srv, ctx := newJob(t, 3)
	clients := []*Client{NewClient(srv.Identity(0)), NewClient(srv.Identity(1)), NewClient(srv.Identity(2))}
	type res struct {
		round int
		addrs []string
		err   error
	}
	out := make(chan res, 6)
	second := make(chan struct{}) // rank 2 joins round 1 only once this closes
	for r, c := range clients {
		go func() {
			for round := range 2 {
				if r == 2 && round == 1 {
					<-second
				}
				a, err := c.Exchange(ctx, fmt.Sprintf("r%d-%d", round, r))
				out <- res{round, a, err}
			}
		}()
	}
	got := map[int]int{}
	for range 5 { // rounds 0 of all three, round 1 of none: rank 2 is held
		select {
		case r := <-out:
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.round != 0 || strings.Join(r.addrs, ",") != "r0-0,r0-1,r0-2" {
				t.Fatalf("round %d table %v before rank 2 joined round 1", r.round, r.addrs)
			}
			got[r.round]++
		case <-time.After(300 * time.Millisecond):
		}
		if got[0] == 3 {
			break
		}
	}
	if got[0] != 3 {
		t.Fatalf("round 0: %d of 3 ranks passed", got[0])
	}
	select {
	case r := <-out:
		t.Fatalf("a rank passed round %d while rank 2 had not joined it: %v", r.round, r.addrs)
	case <-time.After(200 * time.Millisecond):
	}
	close(second)
	for range 3 {
		r := <-out
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.round != 1 || strings.Join(r.addrs, ",") != "r1-0,r1-1,r1-2" {
			t.Fatalf("round %d table %v", r.round, r.addrs)
		}
	}
	if a := srv.Addrs(); strings.Join(a, ",") != "r0-0,r0-1,r0-2" {
		t.Fatalf("Addrs %v, want round 0's table", a)
	}
}

func TestRefusals(t *testing.T) {
	srv, ctx := newJob(t, 2)
	wrongKey := srv.Identity(0)
	wrongKey.Key = make([]byte, 32)
	if _, err := NewClient(wrongKey).Exchange(ctx, "x"); err == nil || !strings.Contains(err.Error(), "wrong job key") {
		t.Fatalf("wrong key: %v", err)
	}
	badRank := srv.Identity(5)
	if _, err := NewClient(badRank).Exchange(ctx, "x"); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("bad rank: %v", err)
	}
	// A rank that joins twice is refused; the first stays waiting.
	first := make(chan error, 1)
	go func() { _, err := NewClient(srv.Identity(1)).Exchange(ctx, "x"); first <- err }()
	for deadline := time.Now().Add(10 * time.Second); !srv.registered(1); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first rank 1 did not register in 10 s")
		}
	}
	if _, err := NewClient(srv.Identity(1)).Exchange(ctx, "y"); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("duplicate rank: %v", err)
	}
	if _, err := NewClient(srv.Identity(0)).Exchange(ctx, "z"); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

func TestIdentityFromEnvErrorsNameTheVariable(t *testing.T) {
	id := bootstrap.Identity{Rank: 1, Size: 4, JobID: 0xabc, Key: make([]byte, 16), Server: "/tmp/x"}
	for _, kv := range id.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	if got, err := bootstrap.IdentityFromEnv(); err != nil || got.Rank != 1 || got.Size != 4 || got.JobID != 0xabc {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for _, c := range []struct{ k, v string }{
		{bootstrap.EnvRank, "4"}, {bootstrap.EnvSize, "zero"}, {bootstrap.EnvJobID, "xyz"}, {bootstrap.EnvKey, "00"}, {bootstrap.EnvServer, ""},
	} {
		for _, kv := range id.Env() {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		t.Setenv(c.k, c.v)
		if _, err := bootstrap.IdentityFromEnv(); err == nil || !strings.Contains(err.Error(), c.k) {
			t.Errorf("%s=%q: %v, want an error naming it", c.k, c.v, err)
		}
	}
}

func FuzzParseTable(f *testing.F) {
	var ok []byte
	for _, a := range []string{"127.0.0.1:1", "x"} {
		ok = binary.LittleEndian.AppendUint32(ok, uint32(len(a)))
		ok = append(ok, a...)
	}
	f.Add(ok, 2)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, 1)
	f.Fuzz(func(t *testing.T, b []byte, size int) {
		if size < 0 || size > 1<<16 {
			return
		}
		addrs, err := parseTable(b, size)
		if err == nil && len(addrs) != size {
			t.Fatalf("accepted a table of %d for size %d", len(addrs), size)
		}
	})
}

func FuzzParseJoin(f *testing.F) {
	f.Add(appendJoin(nil, joinRequest{rank: 3, round: 1, addr: "127.0.0.1:9"}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseJoin(b)
		if err != nil {
			if len(b) >= 40 {
				t.Fatalf("a request of %d bytes refused: %v", len(b), err)
			}
			return
		}
		if again := appendJoin(nil, r); string(again) != string(b) {
			t.Fatalf("round trip %x, want %x", again, b)
		}
	})
}

func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{3, 0, 0, 0, 'a', 'b', 'c'})
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := readFrame(strings.NewReader(string(b)))
		if err == nil && len(got) > len(b) {
			t.Fatal("frame longer than input")
		}
	})
}

// registered reports whether rank has joined srv (for tests that need a
// join to have happened before the next step).
func (s *Server) registered(rank int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rounds[0] != nil && s.rounds[0].conn[rank] != nil
}

// Pretended hosts: VIGIL_RANKS_PER_HOST = k places rank r on host r/k
// (bootstrap.Hosts), without it there are none; a bad value is refused.
func TestPretendedHosts(t *testing.T) {
	id := bootstrap.Identity{Rank: 1, Size: 6, JobID: 7, Key: make([]byte, 16), Server: "/nonexistent"}
	for _, kv := range id.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	c, err := Join()
	if err != nil || bootstrap.Hosts(c) != nil {
		t.Fatalf("no pretended hosts: %v, %v", bootstrap.Hosts(c), err)
	}
	t.Setenv(bootstrap.EnvRanksPerHost, "4")
	if c, err = Join(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(bootstrap.Hosts(c), ","); got != "host0,host0,host0,host0,host1,host1" {
		t.Errorf("hosts %s", got)
	}
	t.Setenv(bootstrap.EnvRanksPerHost, "0")
	if _, err := Join(); err == nil || !strings.Contains(err.Error(), bootstrap.EnvRanksPerHost) {
		t.Errorf("%s=0: %v", bootstrap.EnvRanksPerHost, err)
	}
}
