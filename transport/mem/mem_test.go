package mem

import (
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/lab/testnet"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// recorder collects the sequence numbers each rank receives from each
// sender and checks they arrive in order.
type recorder struct {
	mu    sync.Mutex
	next  map[[2]ranks.Rank]uint64 // (from, to) -> next expected seq
	count atomic.Int64
	err   error
}

func newRecorder() *recorder { return &recorder{next: map[[2]ranks.Rank]uint64{}} }

func (r *recorder) handler(self ranks.Rank) transport.Handler {
	return func(from ranks.Rank, p []byte) {
		seq := binary.LittleEndian.Uint64(p)
		r.mu.Lock()
		k := [2]ranks.Rank{from, self}
		if seq != r.next[k] && r.err == nil {
			r.err = errors.New("out of order")
		}
		r.next[k] = seq + 1
		r.mu.Unlock()
		r.count.Add(1)
	}
}

func msg(seq uint64) []byte { return binary.LittleEndian.AppendUint64(nil, seq) }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func testAllToAll(t *testing.T, n, per int, opts ...Option) {
	leaks := testnet.NoLeaks(t, 10*time.Second)
	nw := NewNetwork(n, opts...)
	rec := newRecorder()
	eps := make([]transport.Transport, n)
	for i := range eps {
		eps[i] = nw.Endpoint(ranks.Rank(i), transport.NewSlots(n), rec.handler(ranks.Rank(i)))
	}
	var wg sync.WaitGroup
	for i := range eps {
		wg.Go(func() {
			for s := range per {
				for to := range n {
					if err := eps[i].Send(ranks.Rank(to), msg(uint64(s))); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	want := int64(n * n * per)
	waitFor(t, "all messages", func() bool { return rec.count.Load() == want })
	if rec.err != nil {
		t.Fatal(rec.err)
	}
	var sent, recv uint64
	for _, e := range eps {
		st := e.Stats()
		sent += st.MsgsSent
		recv += st.MsgsRecv
	}
	if sent != uint64(want) || recv != uint64(want) {
		t.Fatalf("stats: sent %d recv %d, want %d", sent, recv, want)
	}
	nw.Close()
	leaks()
}

func TestAllToAllOrdered(t *testing.T) { testAllToAll(t, 8, 50) }

func TestAllToAllDelayedOrdered(t *testing.T) {
	testAllToAll(t, 8, 20, WithDelay(2*time.Millisecond, 1))
}

func Test256Endpoints(t *testing.T) {
	leaks := testnet.NoLeaks(t, 10*time.Second)
	before := runtime.NumGoroutine()
	const n = 256
	nw := NewNetwork(n, WithDelay(time.Millisecond, 7))
	rec := newRecorder()
	eps := make([]transport.Transport, n)
	for i := range eps {
		eps[i] = nw.Endpoint(ranks.Rank(i), transport.NewSlots(n), rec.handler(ranks.Rank(i)))
	}
	if g := runtime.NumGoroutine() - before; g > n+2 {
		t.Fatalf("%d goroutines for %d endpoints", g, n)
	}
	// Each rank sends 20 messages to each of its 8 hypercube neighbours.
	for s := range 20 {
		for i := range n {
			for b := 1; b < n; b <<= 1 {
				if err := eps[i].Send(ranks.Rank(i^b), msg(uint64(s))); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if g := runtime.NumGoroutine() - before; g > n+2 {
		t.Fatalf("%d goroutines while delivering", g)
	}
	waitFor(t, "all messages", func() bool { return rec.count.Load() == n*8*20 })
	if rec.err != nil {
		t.Fatal(rec.err)
	}
	nw.Close()
	leaks()
}

func TestHeartbeatLandsInSlot(t *testing.T) {
	nw := NewNetwork(4)
	defer nw.Close()
	slots := transport.NewSlots(4)
	nw.Endpoint(1, slots, nil)
	e3 := nw.Endpoint(3, transport.NewSlots(4), nil)
	if err := e3.SendHeartbeat(1, 5); err != nil {
		t.Fatal(err)
	}
	if got := slots.Load(3); got != 5 {
		t.Fatalf("slot 3 = %d, want 5", got)
	}
	_ = e3.SendHeartbeat(1, 4) // reordered: must not go backwards
	if got := slots.Load(3); got != 5 {
		t.Fatalf("slot 3 = %d after older heartbeat", got)
	}
	if n := testing.AllocsPerRun(1000, func() { _ = e3.SendHeartbeat(1, 9) }); n != 0 {
		t.Fatalf("SendHeartbeat allocates %v", n)
	}
	if st := e3.Stats(); st.HeartbeatsSent == 0 {
		t.Fatal("no heartbeat counted")
	}
	// To a rank without an endpoint: dropped, counted.
	if err := e3.SendHeartbeat(2, 1); err != nil {
		t.Fatal(err)
	}
	if st := e3.Stats(); st.HeartbeatsDropped != 1 {
		t.Fatalf("dropped = %d", st.HeartbeatsDropped)
	}
}

func TestKill(t *testing.T) {
	leaks := testnet.NoLeaks(t, 10*time.Second)
	nw := NewNetwork(3)
	var got [3]atomic.Int64
	h := func(self int) transport.Handler {
		return func(ranks.Rank, []byte) { got[self].Add(1) }
	}
	s1 := transport.NewSlots(3)
	e0 := nw.Endpoint(0, transport.NewSlots(3), h(0))
	e1 := nw.Endpoint(1, s1, h(1))
	e2 := nw.Endpoint(2, transport.NewSlots(3), h(2))
	nw.Kill(1)
	if nw.Alive(1) || !nw.Alive(0) {
		t.Fatal("Alive wrong after Kill")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 100000 { // far beyond any queue
			if err := e0.Send(1, msg(uint64(i))); err != nil {
				t.Error(err)
			}
			if err := e0.SendHeartbeat(1, uint64(i+1)); err != nil {
				t.Error(err)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Send to a killed rank blocked")
	}
	if s1.Load(0) != 0 {
		t.Fatal("heartbeat reached a killed rank")
	}
	// The killed rank sends nothing.
	_ = e1.Send(2, msg(0))
	_ = e1.SendHeartbeat(2, 1)
	// Others keep working.
	_ = e2.Send(0, msg(0))
	waitFor(t, "delivery among live ranks", func() bool { return got[0].Load() == 1 })
	time.Sleep(10 * time.Millisecond)
	if got[1].Load() != 0 || got[2].Load() != 0 {
		t.Fatalf("killed rank took part: %d %d", got[1].Load(), got[2].Load())
	}
	if st := e0.Stats(); st.MsgsDropped != 100000 {
		t.Fatalf("dropped %d", st.MsgsDropped)
	}
	// Restart rank 1.
	e1b := nw.Endpoint(1, s1, h(1))
	_ = e0.Send(1, msg(0))
	waitFor(t, "delivery to the restarted rank", func() bool { return got[1].Load() == 1 })
	_ = e1b
	nw.Close()
	leaks()
}

func TestErrors(t *testing.T) {
	nw := NewNetwork(2, WithMaxPayload(8))
	e := nw.Endpoint(0, nil, nil)
	if err := e.Send(2, nil); !errors.Is(err, transport.ErrUnknownRank) {
		t.Fatalf("unknown rank: %v", err)
	}
	if err := e.SendHeartbeat(2, 1); !errors.Is(err, transport.ErrUnknownRank) {
		t.Fatalf("unknown rank heartbeat: %v", err)
	}
	if err := e.Send(1, make([]byte, 9)); !errors.Is(err, transport.ErrTooLarge) {
		t.Fatalf("too large: %v", err)
	}
	nw.Close()
	if err := e.Send(1, nil); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
	if err := e.SendHeartbeat(1, 1); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("closed heartbeat: %v", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("duplicate endpoint accepted")
			}
		}()
		nw2 := NewNetwork(1)
		defer nw2.Close()
		nw2.Endpoint(0, nil, nil)
		nw2.Endpoint(0, nil, nil)
	}()
}

func TestQueueFullDrops(t *testing.T) {
	nw := NewNetwork(2, WithQueueLen(4))
	defer nw.Close()
	block := make(chan struct{})
	var n atomic.Int64
	nw.Endpoint(1, nil, func(ranks.Rank, []byte) { <-block; n.Add(1) })
	e0 := nw.Endpoint(0, nil, nil)
	for range 20 {
		_ = e0.Send(1, nil)
	}
	close(block)
	st := e0.Stats()
	if st.MsgsDropped < 20-5 || st.MsgsSent+st.MsgsDropped != 20 {
		t.Fatalf("sent %d dropped %d", st.MsgsSent, st.MsgsDropped)
	}
	waitFor(t, "queued messages", func() bool { return uint64(n.Load()) == st.MsgsSent })
}

func BenchmarkMemSend(b *testing.B) {
	nw := NewNetwork(2)
	defer nw.Close()
	nw.Endpoint(1, nil, func(ranks.Rank, []byte) {})
	e0 := nw.Endpoint(0, nil, nil)
	p := make([]byte, 64)
	b.ReportAllocs()
	for range b.N {
		_ = e0.Send(1, p)
	}
}
