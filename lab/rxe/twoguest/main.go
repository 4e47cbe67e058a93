//go:build cgo && verbs

// Command twoguest runs one guest's share of a Vigil job over the verbs
// transport in one of two or three rxe guests joined by a qemu network
// (lab/rxe/run.sh): with -guests k, guest a runs ranks [0, n/k), guest b the
// next n/k, guest c the last, as nodes of one process each, on the guest's
// rxe0 (over eth0). The guests exchange their verbs addresses over a plain
// TCP rendezvous on the guests' network (the role of the job's bootstrap;
// guest a serves it) and start their nodes: the ring's heartbeats cross
// hosts as RDMA writes.
//
// The last guest (b of two, c of three) prints "RXE-TWOGUEST-READY" once
// its heartbeat links are up and then waits; the host powers it off
// outright (SIGKILL to its qemu). Every other guest checks that each of its
// ranks reports exactly the last guest's ranks — completeness and accuracy,
// with broadcasts and re-linked heartbeats crossing hosts when there are
// two survivors — and exits 0 on success.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vigil-hpc/vigil"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	vtr "github.com/vigil-hpc/vigil/transport/verbs"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "twoguest:", err)
		os.Exit(1)
	}
}

func run() error {
	role := flag.String("role", "", "a (first ranks, rendezvous server), b or c")
	guests := flag.Int("guests", 2, "guests in the job (2 or 3); the last one is powered off")
	n := flag.Int("n", 0, "ranks in the job, a multiple of -guests (default 4 per guest)")
	server := flag.String("server", "10.98.0.1:7070", "rendezvous address (guest a listens)")
	h := flag.Duration("h", 50*time.Millisecond, "heartbeat period")
	delta := flag.Duration("delta", 3*time.Second, "suspicion time-out (generous: two TCG guests share the host's cores)")
	wait := flag.Duration("wait", 60*time.Second, "how long guest a waits for the verdict")
	flag.Parse()
	if *n == 0 {
		*n = 4 * *guests
	}
	g := strings.Index("abc", *role)
	if *guests < 2 || *guests > 3 || len(*role) != 1 || g < 0 || g >= *guests || *n%*guests != 0 {
		return fmt.Errorf("-guests 2|3, -role one of its guests (a, b, c) and -n a multiple of -guests are required")
	}
	half := *n / *guests           // ranks per guest
	const grace = 20 * time.Second // a loaded host slows TCG guests ~10x
	first := g * half
	victim := g == *guests-1
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The guest's device for vigil.Join's verbs transport.
	os.Setenv("VIGIL_VERBS_DEVICE", os.Getenv("VIGIL_RXE_DEV"))
	os.Setenv("VIGIL_VERBS_NETDEV", os.Getenv("VIGIL_RXE_NETDEV"))
	grp := &group{n: *n, first: first, key: []byte("two-guest-job-key-0123456789abcdef"),
		addrs: make([]string, half), done: make(chan struct{}),
		rendezvous: func(mine []string) ([]string, error) { return rendezvous(g, *guests, *server, mine, *n) }}
	// Every rank of this guest joins at once: their exchanges meet in grp.
	dets := make([]*vigil.Detector, half)
	errs := make([]error, half)
	var wg sync.WaitGroup
	for i := range dets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := vigil.DefaultConfig()
			cfg.HeartbeatPeriod, cfg.SuspectTimeout, cfg.StartGrace, cfg.Logger = *h, *delta, grace, log
			cfg.Bootstrap, cfg.Transport = member{grp, uint32(first + i)}, "verbs"
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			if dets[i], errs[i] = vigil.Join(ctx, cfg); errs[i] == nil && dets[i].Transport() != "verbs" {
				errs[i] = fmt.Errorf("rank %d fell back to %s", first+i, dets[i].Transport())
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	nodes := make([]*node.Node, half)
	for i, d := range dets {
		nodes[i] = d.Node
	}
	rc := func(i int) vtr.VerbsStats { st, _ := dets[i].VerbsStats(); return st }
	started := time.Now()
	fmt.Printf("RXE-INFO twoguest role=%s ranks=%d..%d started\n", *role, first, first+half-1)
	if err := waitUntil(30*time.Second, func() bool {
		for i := range dets {
			if rc(i).RCWrites == 0 {
				return false
			}
		}
		return true
	}); err != nil {
		return fmt.Errorf("heartbeat links not all up: %w", err)
	}
	// Past the start-up grace, so that suspicions are armed everywhere.
	time.Sleep(max(2*time.Second, time.Until(started.Add(grace+2*time.Second))))
	for i, nd := range nodes {
		if d := nd.Dead(); len(d) != 0 {
			return fmt.Errorf("rank %d reports %v dead before any failure", first+i, d)
		}
	}
	if victim {
		fmt.Println("RXE-TWOGUEST-READY")
		select {} // until the host powers this guest off
	}
	fmt.Printf("RXE-INFO twoguest role=%s links up, waiting for the last guest to be powered off\n", *role)
	want := make([]ranks.Rank, 0, half)
	for r := *n - half; r < *n; r++ {
		want = append(want, ranks.Rank(r))
	}
	var firstSeen time.Time
	err := waitUntil(*wait, func() bool {
		all := true
		for _, nd := range nodes {
			d := nd.Dead()
			if len(d) > 0 && firstSeen.IsZero() {
				firstSeen = time.Now()
			}
			if !slices.Equal(d, want) {
				all = false
			}
		}
		return all
	})
	for i, nd := range nodes {
		fmt.Printf("RXE-INFO twoguest rank=%d dead=%v rc_writes=%d rc_errors=%d\n", first+i, nd.Dead(),
			rc(i).RCWrites, rc(i).RCErrors)
	}
	if err != nil {
		return fmt.Errorf("survivors did not all report exactly %v: %w", want, err)
	}
	fmt.Printf("RXE-INFO twoguest survivors=%d reported=%v first_to_all_ms=%d\n", half, want,
		time.Since(firstSeen).Milliseconds())
	for _, d := range dets {
		d.Close()
	}
	return nil
}

// group is the bootstrap of the ranks this guest runs: their exchanges
// meet here, and the last to publish does the guests' rendezvous for all.
type group struct {
	n, first   int
	key        []byte
	rendezvous func(mine []string) ([]string, error)

	mu    sync.Mutex
	addrs []string // this guest's ranks' addresses
	got   int
	done  chan struct{}
	table []string
	err   error
}

// member is one rank's bootstrap.Bootstrap in a group.
type member struct {
	g    *group
	rank uint32
}

func (m member) Rank() uint32  { return m.rank }
func (m member) Size() int     { return m.g.n }
func (m member) JobID() uint64 { return 0x2937 }
func (m member) Key() []byte   { return m.g.key }
func (m member) Close() error  { return nil }

// Exchange publishes addr and returns every rank's address once every rank
// of this guest has published and the rendezvous with the other guests is
// done. Later calls (the detector's start fence) return the same table at
// once: the guests' ranks are not fenced a second time, and their start-up
// grace counts from their own start.
func (m member) Exchange(ctx context.Context, addr string) ([]string, error) {
	g := m.g
	select {
	case <-g.done:
		return g.table, g.err
	default:
	}
	g.mu.Lock()
	g.addrs[int(m.rank)-g.first] = addr
	g.got++
	last := g.got == len(g.addrs)
	g.mu.Unlock()
	if last {
		g.table, g.err = g.rendezvous(g.addrs)
		close(g.done)
	}
	select {
	case <-g.done:
		return g.table, g.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// rendezvous exchanges the guests' addresses: every other guest sends its
// index and its lines to guest a (index 0), which answers each with the
// whole table.
func rendezvous(g, guests int, server string, mine []string, n int) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	per := n / guests
	if g == 0 {
		ln, err := net.Listen("tcp", server)
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		go func() { <-ctx.Done(); ln.Close() }()
		all := make([]string, n)
		copy(all, mine)
		conns := make([]net.Conn, 0, guests-1)
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for range guests - 1 {
			c, err := ln.Accept()
			if err != nil {
				return nil, fmt.Errorf("%d of %d guests at %s: %w", len(conns)+1, guests, server, err)
			}
			conns = append(conns, c)
			lines, err := readLines(c, per+1)
			if err != nil {
				return nil, err
			}
			i := strings.Index("abc", lines[0])
			if i < 1 || i >= guests || all[i*per] != "" {
				return nil, fmt.Errorf("rendezvous: unexpected guest %q", lines[0])
			}
			copy(all[i*per:], lines[1:])
		}
		for _, c := range conns {
			if _, err := fmt.Fprintln(c, strings.Join(all, "\n")); err != nil {
				return nil, err
			}
		}
		return all, nil
	}
	var c net.Conn
	var err error
	for ctx.Err() == nil { // guest a may still be booting
		var d net.Dialer
		if c, err = d.DialContext(ctx, "tcp", server); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if c == nil {
		return nil, fmt.Errorf("cannot reach guest a at %s: %w", server, err)
	}
	defer c.Close()
	if _, err := fmt.Fprintln(c, string("abc"[g])+"\n"+strings.Join(mine, "\n")); err != nil {
		return nil, err
	}
	return readLines(c, n)
}

func readLines(c net.Conn, k int) ([]string, error) {
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	sc := bufio.NewScanner(c)
	var out []string
	for len(out) < k && sc.Scan() {
		out = append(out, sc.Text())
	}
	if len(out) < k {
		return nil, fmt.Errorf("rendezvous: %d of %d addresses (%v)", len(out), k, sc.Err())
	}
	return out, nil
}

// waitUntil polls cond every 10 ms for up to d.
func waitUntil(d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not after %v", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}
