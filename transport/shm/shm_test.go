package shm

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/heartbeat"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
	"github.com/vigil-hpc/vigil/transport/mem"
)

var testKey = []byte("0123456789abcdef0123")

func params(job uint64, rank uint32, n int) wire.Params {
	return wire.Params{JobID: job, Key: testKey, Rank: rank, N: n, Incarnation: 1}
}

// region returns the region p describes, closed when the test ends.
func region(tb testing.TB, p wire.Params) *Region {
	tb.Helper()
	r, err := NewRegion(p, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close() })
	return r
}

// testJob returns a job id no other test run uses.
func testJob() uint64 { return uint64(time.Now().UnixNano()) }

// TestAttachSharesTheWords: a store through the attached mapping is a load
// of the region's slot word, and the region counts the emitter it served.
func TestAttachSharesTheWords(t *testing.T) {
	job := testJob()
	r := region(t, params(job, 1, 4))
	s, err := Attach(params(job, 3, 4), 1)
	if err != nil {
		t.Fatal(err)
	}
	s.Store(3, 42)
	if got := r.Slots().Load(3); got != 42 {
		t.Fatalf("region word of rank 3 = %d, want 42", got)
	}
	if r.Served() != 1 {
		t.Fatalf("served %d", r.Served())
	}
}

// TestAttachRefuses: the wrong key, another size of job, another job or a
// rank with no region on this host are refused with a clear error.
func TestAttachRefuses(t *testing.T) {
	job := testJob()
	region(t, params(job, 1, 4))
	wrongKey := params(job, 3, 4)
	wrongKey.Key = []byte("another key, not the job's")
	cases := []struct {
		name string
		p    wire.Params
		to   ranks.Rank
		want string
	}{
		{"wrong key", wrongKey, 1, "authentication"},
		{"other size", params(job, 3, 8), 1, "words"},
		{"no region", params(job, 3, 4), 2, "connect"},
		{"other job", params(job+1, 3, 4), 1, "connect"},
	}
	for _, c := range cases {
		if _, err := Attach(c.p, c.to); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error about %q", c.name, err, c.want)
		}
	}
}

// TestWrapMovesHeartbeatsToSharedMemory: heartbeats first go through the
// inner transport, then, once the observer's region is mapped, into it;
// messages stay on the inner transport.
func TestWrapMovesHeartbeatsToSharedMemory(t *testing.T) {
	job := testJob()
	net := mem.NewNetwork(2)
	r1 := region(t, params(job, 1, 2))
	got := make(chan []byte, 1)
	in0 := net.Endpoint(0, transport.NewSlots(2), func(ranks.Rank, []byte) {})
	in1 := net.Endpoint(1, r1.Slots(), func(_ ranks.Rank, p []byte) { got <- p })
	defer in1.Close()
	tr := Wrap(in0, params(job, 0, 2), nil)
	defer tr.Close()
	deadline := time.Now().Add(10 * time.Second)
	seq := uint64(0)
	for !tr.Mapped(1) {
		if time.Now().After(deadline) {
			t.Fatal("region of rank 1 never mapped")
		}
		seq++
		if err := tr.SendHeartbeat(1, seq); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	viaNet := in0.Stats().HeartbeatsSent
	for range 10 {
		seq++
		if err := tr.SendHeartbeat(1, seq); err != nil {
			t.Fatal(err)
		}
	}
	if r1.Slots().Load(0) != seq {
		t.Fatalf("word %d, want %d", r1.Slots().Load(0), seq)
	}
	if in0.Stats().HeartbeatsSent != viaNet {
		t.Fatal("heartbeats still went through the inner transport once mapped")
	}
	if err := tr.SendHeartbeat(2, 1); err == nil {
		t.Fatal("heartbeat to an unknown rank accepted")
	}
	if err := tr.Send(1, []byte("m")); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-got:
		if string(p) != "m" {
			t.Fatalf("message %q", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("message not delivered by the inner transport")
	}
}

// mapped returns rank 0's transport of a 2-rank job, with the region of
// rank 1 mapped (no inner transport).
func mapped(tb testing.TB) *Transport {
	job := testJob()
	region(tb, params(job, 1, 2))
	s, err := Attach(params(job, 0, 2), 1)
	if err != nil {
		tb.Fatal(err)
	}
	tr := Wrap(nil, params(job, 0, 2), nil)
	tr.maps[1].Store(s)
	return tr
}

// TestHeartbeatDoesNotAllocate: a mapped heartbeat allocates nothing.
func TestHeartbeatDoesNotAllocate(t *testing.T) {
	tr := mapped(t)
	seq := uint64(0)
	if a := testing.AllocsPerRun(1000, func() { seq++; _ = tr.SendHeartbeat(1, seq) }); a != 0 {
		t.Fatalf("%v allocs per heartbeat", a)
	}
}

// FuzzCheckHello: the region's hello decoder never panics and accepts
// only an authentic frame of the expected rank and size.
func FuzzCheckHello(f *testing.F) {
	p := params(7, 1, 4)
	q := p
	q.MaxPayload = helloMax
	good, _ := wire.NewCodec(q).Append(nil, wire.Msg, append([]byte(helloPayload), 4, 0, 0, 0))
	f.Add(good)
	f.Add(good[:10])
	f.Fuzz(func(t *testing.T, b []byte) {
		words, err := checkHello(params(7, 2, 4), 1, b)
		if err == nil && words != 4 {
			t.Fatalf("accepted %d words", words)
		}
	})
}

// BenchmarkHeartbeat is the emitter's cost of one shared-memory heartbeat.
func BenchmarkHeartbeat(b *testing.B) {
	tr := mapped(b)
	seq := uint64(0)
	b.ReportAllocs()
	for b.Loop() {
		seq++
		_ = tr.SendHeartbeat(1, seq)
	}
}

// TestLifeWordShowsTheHeartbeatThread: a rank's heartbeat thread raises
// its life word, its own word in its region, at every period, with no
// observer; another rank of the host reads it through LifeWord once the
// region is mapped, and it stops when the thread stops.
func TestLifeWordShowsTheHeartbeatThread(t *testing.T) {
	job := testJob()
	r1 := region(t, params(job, 1, 2))
	for _, native := range []bool{false, true} {
		cfg := heartbeat.EmitterConfig{Period: int64(time.Millisecond), CPU: -1,
			Send: func(ranks.Rank, uint64) error { return nil }, Life: r1.Slots().Word(1)}
		if native {
			cfg.Sink = func(ranks.Rank) (heartbeat.Sink, bool) { return heartbeat.Sink{}, false }
		}
		e, err := heartbeat.NewEmitter(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(); err != nil {
			t.Fatal(err)
		}
		tr := Wrap(mem.NewNetwork(2).Endpoint(0, transport.NewSlots(2), func(ranks.Rank, []byte) {}), params(job, 0, 2), nil)
		deadline := time.Now().Add(10 * time.Second)
		var w *uint64
		for w = tr.LifeWord(1); w == nil; w = tr.LifeWord(1) {
			if time.Now().After(deadline) {
				t.Fatal("rank 1's region never mapped")
			}
			time.Sleep(time.Millisecond)
		}
		first := atomic.LoadUint64(w)
		for atomic.LoadUint64(w) <= first {
			if time.Now().After(deadline) {
				t.Fatalf("native %v: the life word stayed at %d", native, first)
			}
			time.Sleep(time.Millisecond)
		}
		e.Close()
		stopped := atomic.LoadUint64(w)
		time.Sleep(20 * time.Millisecond)
		if got := atomic.LoadUint64(w); got != stopped {
			t.Fatalf("native %v: the life word grew from %d to %d after Close", native, stopped, got)
		}
		if tr.LifeWord(5) != nil {
			t.Fatal("a life word for a rank outside the job")
		}
		if !tr.Runnable(1) || tr.Runnable(5) {
			t.Fatalf("Runnable: rank 1 (this running process) %v, rank 5 (outside the job) %v", tr.Runnable(1), tr.Runnable(5))
		}
		tr.Close()
	}
}

// TestWarmMapsNow: Warm maps a rank of this host at once (or waits for the
// attach already under way), so that the next heartbeat to it is a store
// and its life word can be read; a rank with no region here (another host)
// fails at once and stays on the network.
func TestWarmMapsNow(t *testing.T) {
	job := testJob()
	region(t, params(job, 1, 4))
	tr := Wrap(mem.NewNetwork(4).Endpoint(0, transport.NewSlots(4), func(ranks.Rank, []byte) {}), params(job, 0, 4), nil)
	defer tr.Close()
	tr.LifeWord(1) // an attach in the background, which Warm waits for
	start := time.Now()
	if n := tr.Warm(5*time.Second, 1, 3, 0); n != 1 {
		t.Fatalf("Warm mapped %d of ranks 1 and 3, want 1", n)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Warm took %v for a rank here and one absent", d)
	}
	if !tr.Mapped(1) || tr.Mapped(3) {
		t.Fatalf("mapped: rank 1 %v, rank 3 %v; want true, false", tr.Mapped(1), tr.Mapped(3))
	}
	if tr.LifeWord(1) == nil || !tr.Runnable(1) {
		t.Fatal("rank 1's life word or process unknown after Warm")
	}
	if err := tr.SendHeartbeat(1, 7); err != nil {
		t.Fatal(err)
	}
	if tr.stored.Load() != 1 || tr.viaInner.Load() != 0 {
		t.Fatalf("%d heartbeats stored, %d on the network; want 1 and 0", tr.stored.Load(), tr.viaInner.Load())
	}
}
