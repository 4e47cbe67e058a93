package era_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/era"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
	"github.com/vigil-hpc/vigil/transport/mem"
	"github.com/vigil-hpc/vigil/transport/tcp"
)

// The failure-free latency benchmark of seed 001's Figure 2a: ERA against
// an allreduce of the same value (recursive doubling, the algorithm MPI
// libraries use for short allreduces), both over the same transport and
// the same plumbing: one goroutine per process that receives its messages
// from the transport's handler through a channel, encodes what it sends
// and decodes what it receives. Each process runs K operations back to
// back; the latency of an operation is the slowest process's time for the
// K operations divided by K (the paper reports the maximum of the
// per-process means).
//
// TestLatencyERAvsAllreduce prints the table when VIGIL_ERA_BENCH is set;
// without it, it runs one small case and checks the results only.

// rigIn is one received message.
type rigIn struct {
	from    ranks.Rank
	payload []byte
}

// rig is n processes connected by one kind of transport.
type rig struct {
	n   int
	trs []transport.Transport
	in  []chan rigIn
	net *mem.Network
}

func newRig(tb testing.TB, kind string, n int) *rig {
	tb.Helper()
	r := &rig{n: n, trs: make([]transport.Transport, n), in: make([]chan rigIn, n)}
	for i := range n {
		r.in[i] = make(chan rigIn, 4096)
	}
	handler := func(i int) transport.Handler {
		return func(from ranks.Rank, p []byte) { r.in[i] <- rigIn{from, p} }
	}
	switch kind {
	case "mem":
		r.net = mem.NewNetwork(n)
		for i := range n {
			r.trs[i] = r.net.Endpoint(ranks.Rank(i), nil, handler(i))
		}
	case "tcp":
		addrs := make([]string, n)
		for i := range n {
			tr, err := tcp.Listen(tcp.Config{Self: uint32(i), N: n, JobID: 9, Key: []byte("era-latency-bench-key"),
				Slots: transport.NewSlots(n), Handler: handler(i), QueueLen: 1 << 14})
			if err != nil {
				tb.Fatal(err)
			}
			r.trs[i], addrs[i] = tr, tr.Addr()
		}
		for i := range n {
			if err := r.trs[i].(*tcp.Transport).SetPeers(addrs); err != nil {
				tb.Fatal(err)
			}
		}
	default:
		tb.Fatalf("unknown transport %q", kind)
	}
	return r
}

func (r *rig) close() {
	for _, tr := range r.trs {
		tr.Close()
	}
	if r.net != nil {
		r.net.Close()
	}
}

// run starts body on every process at once and returns the slowest
// process's time.
func (r *rig) run(body func(p int) error) (time.Duration, error) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	times := make([]time.Duration, r.n)
	errs := make([]error, r.n)
	for p := range r.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			t0 := time.Now()
			errs[p] = body(p)
			times[p] = time.Since(t0)
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return slices.Max(times), nil
}

// recv waits for the next message of process p.
func (r *rig) recv(p int) (rigIn, error) {
	select {
	case m := <-r.in[p]:
		return m, nil
	case <-time.After(20 * time.Second):
		return rigIn{}, fmt.Errorf("process %d: no message for 20 s", p)
	}
}

// runERA runs agreements seq0+1..seq0+k (BitOR of vals(p, seq)) at every
// process and checks that all decide the OR of all contributions.
func (r *rig) runERA(cores []*era.Core, seq0 uint64, k int) (time.Duration, error) {
	return r.run(func(p int) error {
		c := cores[p]
		send := func(outs []era.Out) (decided []byte) {
			for _, o := range outs {
				if o.Decided != nil {
					decided = o.Decided.Value
					continue
				}
				b, _ := wire.AppendEraMsg(nil, &o.Msg)
				r.trs[p].Send(o.To, b)
			}
			return decided
		}
		for s := seq0 + 1; s <= seq0+uint64(k); s++ {
			outs, err := c.Start(era.ID{Seq: s}, era.Contribution{Value: contrib(p, s)})
			if err != nil {
				return err
			}
			v := send(outs)
			for v == nil {
				in, err := r.recv(p)
				if err != nil {
					return err
				}
				m, err := wire.DecodeEraMsg(in.payload)
				if err != nil {
					return err
				}
				v = send(c.Step(in.from, m))
			}
			if want := orAll(r.n, s); !slices.Equal(v, want) {
				return fmt.Errorf("process %d, agreement %d: decided %x, want %x", p, s, v, want)
			}
		}
		return nil
	})
}

// runAllreduce runs allreduces seq0+1..seq0+k by recursive doubling (n a
// power of two): in round i, process p exchanges its partial result with
// p XOR 2^i and ORs in the partner's. Messages are seq (8 bytes), round (1
// byte) and the value.
func (r *rig) runAllreduce(seq0 uint64, k int) (time.Duration, error) {
	if r.n&(r.n-1) != 0 {
		return 0, fmt.Errorf("recursive doubling needs a power of two, not %d", r.n)
	}
	rounds := bits.TrailingZeros(uint(r.n))
	return r.run(func(p int) error {
		early := map[[2]uint64][]byte{} // (seq, round) → value received ahead
		for s := seq0 + 1; s <= seq0+uint64(k); s++ {
			acc := contrib(p, s)
			for i := range rounds {
				partner := ranks.Rank(p ^ 1<<i)
				b := binary.LittleEndian.AppendUint64(nil, s)
				b = append(b, byte(i))
				r.trs[p].Send(partner, append(b, acc...))
				key := [2]uint64{s, uint64(i)}
				v, ok := early[key]
				for !ok {
					in, err := r.recv(p)
					if err != nil {
						return err
					}
					if len(in.payload) < 9 {
						return fmt.Errorf("process %d: short message", p)
					}
					k := [2]uint64{binary.LittleEndian.Uint64(in.payload), uint64(in.payload[8])}
					early[k] = in.payload[9:]
					v, ok = early[key]
				}
				delete(early, key)
				acc = era.BitOR.Merge(acc, v)
			}
			if want := orAll(r.n, s); !slices.Equal(acc, want) {
				return fmt.Errorf("process %d, allreduce %d: %x, want %x", p, s, acc, want)
			}
		}
		return nil
	})
}

// runTreeAllreduce runs allreduces seq0+1..seq0+k as a reduce then a
// broadcast on the binary heap tree that ERA uses when nobody fails: the
// same messages and depth as a failure-free ERA, without its bookkeeping.
// Messages are seq (8 bytes), phase (1 byte: 0 up, 1 down) and the value.
func (r *rig) runTreeAllreduce(seq0 uint64, k int) (time.Duration, error) {
	return r.run(func(p int) error {
		type key struct {
			seq  uint64
			down bool
			from ranks.Rank
		}
		early := map[key][]byte{}
		wait := func(want key) ([]byte, error) {
			for {
				if v, ok := early[want]; ok {
					delete(early, want)
					return v, nil
				}
				in, err := r.recv(p)
				if err != nil {
					return nil, err
				}
				if len(in.payload) < 9 {
					return nil, fmt.Errorf("process %d: short message", p)
				}
				early[key{binary.LittleEndian.Uint64(in.payload), in.payload[8] == 1, in.from}] = in.payload[9:]
			}
		}
		msg := func(s uint64, down bool, v []byte) []byte {
			b := binary.LittleEndian.AppendUint64(nil, s)
			if down {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
			return append(b, v...)
		}
		var kids []ranks.Rank
		for c := 2*p + 1; c <= 2*p+2 && c < r.n; c++ {
			kids = append(kids, ranks.Rank(c))
		}
		parent := ranks.Rank((p - 1) / 2)
		for s := seq0 + 1; s <= seq0+uint64(k); s++ {
			acc := contrib(p, s)
			for _, c := range kids {
				v, err := wait(key{s, false, c})
				if err != nil {
					return err
				}
				acc = era.BitOR.Merge(acc, v)
			}
			if p > 0 {
				r.trs[p].Send(parent, msg(s, false, acc))
				v, err := wait(key{s, true, parent})
				if err != nil {
					return err
				}
				acc = v
			}
			for _, c := range kids {
				r.trs[p].Send(c, msg(s, true, acc))
			}
			if want := orAll(r.n, s); !slices.Equal(acc, want) {
				return fmt.Errorf("process %d, tree allreduce %d: %x, want %x", p, s, acc, want)
			}
		}
		return nil
	})
}

func contrib(p int, s uint64) []byte {
	return binary.LittleEndian.AppendUint64(nil, 1<<(uint(p)%64)|s<<40)
}

func orAll(n int, s uint64) []byte {
	v := contrib(0, s)
	for p := 1; p < n; p++ {
		v = era.BitOR.Merge(v, contrib(p, s))
	}
	return v
}

type latencyRow struct {
	kind     string
	n        int
	eraNs    float64
	allredNs float64 // recursive doubling
	treeNs   float64 // reduce + broadcast on the binary tree
}

// measure runs warm-up then k ERA agreements and k allreduces, alternating
// in reps blocks so that machine noise hits both alike.
func measure(tb testing.TB, kind string, n, k, reps int) latencyRow {
	r := newRig(tb, kind, n)
	defer r.close()
	cores := make([]*era.Core, n)
	for p := range n {
		cores[p] = era.NewCore(ranks.Rank(p), n, era.Binary(n), era.BitOR)
	}
	seqE, seqA := uint64(0), uint64(0)
	if _, err := r.runERA(cores, seqE, 50); err != nil { // warm-up: connections
		tb.Fatal(err)
	}
	seqE += 50
	if _, err := r.runAllreduce(seqA, 50); err != nil {
		tb.Fatal(err)
	}
	seqA += 50
	seqT := uint64(0)
	var te, ta, tt time.Duration
	for range reps {
		d, err := r.runERA(cores, seqE, k)
		if err != nil {
			tb.Fatal(err)
		}
		te += d
		seqE += uint64(k)
		d, err = r.runAllreduce(seqA, k)
		if err != nil {
			tb.Fatal(err)
		}
		ta += d
		seqA += uint64(k)
		d, err = r.runTreeAllreduce(seqT, k)
		if err != nil {
			tb.Fatal(err)
		}
		tt += d
		seqT += uint64(k)
	}
	row := latencyRow{kind: kind, n: n, eraNs: float64(te.Nanoseconds()) / float64(k*reps),
		allredNs: float64(ta.Nanoseconds()) / float64(k*reps), treeNs: float64(tt.Nanoseconds()) / float64(k*reps)}
	for p := range n {
		if st := cores[p].Stats(); st.Records > 4 || st.Open != 0 {
			tb.Fatalf("process %d after the benchmark: %+v", p, st)
		}
	}
	return row
}

// runtimeLatency measures node.Agree (BitOR, flat binary tree) among n
// nodes over TCP: the whole runtime, heartbeats included. Nobody fails, so
// δ is long: a loaded host must not evict a live node mid-measurement.
func runtimeLatency(t *testing.T, n, k int) float64 {
	nodes := startTCPNodes(t, n, node.Config{HeartbeatPeriod: 20 * time.Millisecond, SuspectTimeout: 10 * time.Second})
	defer func() {
		for _, nd := range nodes {
			nd.Close()
		}
	}()
	times := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, nd := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range uint64(k + 50) {
				if s == 50 { // after the warm-up
					times[i] = -time.Duration(time.Now().UnixNano())
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				a, err := nd.Agree(ctx, node.OpOR, contrib(i, s))
				cancel()
				if err == nil && !slices.Equal(a.Value, orAll(n, s)) {
					err = fmt.Errorf("rank %d decided %x, want %x", i, a.Value, orAll(n, s))
				}
				if err != nil {
					errs[i] = err
					return
				}
			}
			times[i] += time.Duration(time.Now().UnixNano())
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return float64(slices.Max(times).Nanoseconds()) / float64(k)
}

func TestLatencyERAvsAllreduce(t *testing.T) {
	if os.Getenv("VIGIL_ERA_BENCH") == "" {
		// The small always-on case: both algorithms complete and decide
		// the OR of all contributions over both transports.
		for _, kind := range []string{"mem", "tcp"} {
			row := measure(t, kind, 4, 100, 1)
			t.Logf("%s N=4: ERA %.1f µs, allreduce %.1f µs (recursive doubling), %.1f µs (tree) (set VIGIL_ERA_BENCH=1 for the table)",
				kind, row.eraNs/1e3, row.allredNs/1e3, row.treeNs/1e3)
		}
		t.Logf("tcp N=4: node.Agree %.1f µs", runtimeLatency(t, 4, 100)/1e3)
		return
	}
	k, reps := 2000, 5
	fmt.Printf("%-4s %4s %10s %14s %8s %14s %8s %16s\n", "net", "N", "ERA µs", "rec.doubl. µs", "ratio", "tree r+b µs", "ratio", "node.Agree µs")
	for _, kind := range []string{"mem", "tcp"} {
		for _, n := range []int{4, 8, 16, 32} {
			k := k/(n/4+1) + 200
			row := measure(t, kind, n, k, reps)
			rt := "-"
			if kind == "tcp" {
				rt = fmt.Sprintf("%.1f", runtimeLatency(t, n, k)/1e3)
			}
			fmt.Printf("%-4s %4d %10.1f %14.1f %8.2f %14.1f %8.2f %16s\n", kind, n, row.eraNs/1e3,
				row.allredNs/1e3, row.eraNs/row.allredNs, row.treeNs/1e3, row.eraNs/row.treeNs, rt)
		}
	}
}
