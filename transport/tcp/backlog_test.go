package tcp

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/wire"
)

// TestHeartbeatBacklog starves rank 0's receive path (its reader goroutine
// blocks after storing one heartbeat) while rank 1 goes on heartbeating:
// the heartbeats that wait in the socket are a backlog until the reader
// runs again and stores them.
func TestHeartbeatBacklog(t *testing.T) {
	var stall atomic.Bool
	release := make(chan struct{})
	cl := newCluster(t, 3, 3, func(c *Config) {
		if c.Self == 0 {
			c.afterHeartbeat = func(uint64) {
				if stall.Load() {
					<-release
				}
			}
		}
	})
	defer cl.close()
	var once sync.Once
	unstall := func() { stall.Store(false); once.Do(func() { close(release) }) }
	defer unstall() // before cl.close: a failed test must not leave the reader blocked
	seq := connectHeartbeat(t, cl, 1, 0)
	waitFor(t, "every heartbeat stored", func() bool { return cl.slots[0].Load(1) == seq })
	if cl.ts[0].HeartbeatBacklog(1) {
		t.Fatal("backlog reported with every heartbeat stored")
	}
	if cl.ts[0].HeartbeatBacklog(2) {
		t.Fatal("backlog reported for a rank that never sent a heartbeat")
	}
	stall.Store(true)
	seq++
	if err := cl.ts[1].SendHeartbeat(0, seq); err != nil {
		t.Fatal(err)
	}
	stalledAt := seq
	waitFor(t, "the stalled heartbeat to land", func() bool { return cl.slots[0].Load(1) == stalledAt })
	for range 3 { // these wait in the socket
		seq++
		if err := cl.ts[1].SendHeartbeat(0, seq); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the backlog to show", func() bool { return cl.ts[0].HeartbeatBacklog(1) })
	if got := cl.slots[0].Load(1); got != stalledAt {
		t.Fatalf("slot %d while the reader is stalled at %d", got, stalledAt)
	}
	if cl.ts[0].HeartbeatBacklog(2) || cl.ts[2].HeartbeatBacklog(1) {
		t.Fatal("backlog reported for another link")
	}
	unstall()
	last := seq
	waitFor(t, "the backlog to be stored", func() bool { return cl.slots[0].Load(1) == last })
	waitFor(t, "the backlog to clear", func() bool { return !cl.ts[0].HeartbeatBacklog(1) })
}

// TestHeartbeatBacklogPartialFrame: the remains of a frame (an emitter that
// died while writing one) are no backlog; once the frame is whole it is
// stored.
func TestHeartbeatBacklogPartialFrame(t *testing.T) {
	cl := newCluster(t, 3, 1, nil)
	defer cl.close()
	codec := (&forger{t: t}).codec(wire.Params{Rank: 2, Incarnation: 7})
	c, err := net.Dial("tcp", cl.ts[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hb1 := codec.NewHeartbeatFrame()
	b := frame(t, codec, wire.Hello, wire.AppendHello(nil, 0))
	b = append(b, hb1.Encode(1)...)
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first heartbeat", func() bool { return cl.slots[0].Load(2) == 1 })
	second := append([]byte(nil), hb1.Encode(2)...)
	half := len(second) / 2
	if _, err := c.Write(second[:half]); err != nil {
		t.Fatal(err)
	}
	// Give the half frame time to arrive and be read; it must never count.
	for range 50 {
		if cl.ts[0].HeartbeatBacklog(2) {
			t.Fatal("half a frame reported as a backlog")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if _, err := c.Write(second[half:]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second heartbeat", func() bool { return cl.slots[0].Load(2) == 2 })
	if cl.ts[0].HeartbeatBacklog(2) {
		t.Fatal("backlog reported with every heartbeat stored")
	}
}
