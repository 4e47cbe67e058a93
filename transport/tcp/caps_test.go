package tcp

import (
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/lab/testnet"
)

// strangerHeader is the header of a frame a stranger (no key) can forge:
// the job's ID (public) and a sender rank, announcing payload bytes.
func strangerHeader(payload uint32) []byte {
	h := make([]byte, wire.HeaderSize)
	h[0], h[1], h[2], h[3] = 'V', 'G', wire.Version, byte(wire.Msg)
	binary.LittleEndian.PutUint64(h[4:], testJob)
	binary.LittleEndian.PutUint32(h[12:], 1)
	binary.LittleEndian.PutUint64(h[16:], 1)
	binary.LittleEndian.PutUint32(h[24:], payload)
	return h
}

// heapInUse is the heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestStrangersFramesCostTheirReadBuffer: 100 connections that announce a
// 1 MiB frame and send all of it but the tag (the probe that took an agent
// from 10 to 146 MB) are refused at the header: before its Hello a
// connection may announce at most helloLimit bytes. The heap grows by less
// than 4 MB (the frames alone would be 100 MB), every connection is
// rejected and counted, and honest messages keep flowing.
func TestStrangersFramesCostTheirReadBuffer(t *testing.T) {
	leaks := testnet.NoLeaks(t, 5*time.Second)
	cl := newCluster(t, 2, 2, nil)
	defer cl.close()
	before := heapInUse()
	payload := make([]byte, 1<<20)
	var wg sync.WaitGroup
	for range 100 {
		c, err := net.Dial("tcp", cl.ts[0].Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Go(func() {
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			var ch wire.Challenge
			if _, err := io.ReadFull(c, ch[:]); err != nil {
				return
			}
			c.Write(strangerHeader(1 << 20))
			c.Write(payload) // fails once the transport closed the connection
		})
	}
	wg.Wait()
	rej := func() uint64 {
		st := cl.ts[0].Stats()
		return st.Rejected[wire.ReasonTooLarge] + st.Rejected["pending_cap"]
	}
	waitFor(t, "100 rejections", func() bool { return rej() >= 100 })
	grew := int64(heapInUse()) - int64(before)
	t.Logf("heap grew by %.2f MB for 100 connections announcing 1 MiB frames; rejected: %v", float64(grew)/1e6, cl.ts[0].Stats().Rejected)
	if grew > 4<<20 {
		t.Errorf("heap grew by %d bytes, want < 4 MiB", grew)
	}
	if err := cl.ts[1].Send(0, msg(0)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the honest message", func() bool { return cl.col.count.Load() == 1 })
	cl.close()
	leaks()
}

// TestPendingConnectionsCapped: 1,000 connections that never say Hello
// hold at most MaxPending connections (and their goroutines) in the
// transport, the oldest being closed and counted as "pending_cap"; a rank
// of the job that connects in the middle of the flood is admitted and its
// message delivered.
func TestPendingConnectionsCapped(t *testing.T) {
	leaks := testnet.NoLeaks(t, 5*time.Second)
	cl := newCluster(t, 3, 3, func(c *Config) { c.HelloTimeout = time.Minute })
	defer cl.close()
	tr := cl.ts[0]
	open := func() (in, pending int) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return len(tr.in), tr.pending.Len()
	}
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	most := 0
	for i := range 1000 {
		c, err := net.Dial("tcp", tr.Addr())
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		if i == 500 {
			if err := cl.ts[2].Send(0, msg(0)); err != nil {
				t.Fatal(err)
			}
		}
		if _, p := open(); p > most {
			most = p
		}
	}
	// A connection evicted before its Hello loses what was queued on it,
	// as any failed connection does; the rank's next message redials.
	resent := time.Now()
	waitFor(t, "rank 2's message amid the flood", func() bool {
		if cl.col.count.Load() >= 1 {
			return true
		}
		if time.Since(resent) > 200*time.Millisecond {
			resent = time.Now()
			cl.ts[2].Send(0, msg(0))
		}
		return false
	})
	waitFor(t, "the evictions counted", func() bool { return tr.Stats().Rejected["pending_cap"] >= 1000-DefaultMaxPending })
	// The readers of the evicted connections end (their sockets are
	// closed at once).
	waitFor(t, "the evicted connections' readers to end", func() bool { in, _ := open(); return in <= DefaultMaxPending+1 })
	in, pending := open()
	t.Logf("1000 idle connections: at most %d without Hello; now %d incoming connections (%d without Hello); rejected %v", most, in, pending, tr.Stats().Rejected)
	if most > DefaultMaxPending || in > DefaultMaxPending+1 {
		t.Errorf("held %d connections without Hello at most, %d incoming at the end, want ≤ %d (plus rank 2's)", most, in, DefaultMaxPending)
	}
	cl.col.check(t)
	cl.close()
	for _, c := range conns {
		c.Close()
	}
	leaks()
}
