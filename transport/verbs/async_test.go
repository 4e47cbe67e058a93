package verbs

import (
	"os"
	"os/exec"
	"testing"
	"time"

	ibv "github.com/vigil-hpc/vigil/verbs"
)

// A QP error event on the emitter's heartbeat link breaks the link as a
// failed write would: heartbeats continue over UD and a new link comes up;
// the event is counted, nothing is suspected (the transport has no say in
// suspicion).
func TestAsyncQPErrorBreaksLink(t *testing.T) {
	ts, _ := cluster(t, 2)
	seq := linkUp(t, ts[0], 1)
	l := ts[0].links[1].Load()
	ts[0].handleAsync(ibv.AsyncEvent{Type: ibv.EventQPFatal, QPNum: l.qp.Num()})
	st := ts[0].VerbsStats()
	if st.RCErrors != 1 || st.AsyncEvents != 1 {
		t.Fatalf("after a QP fatal event: %+v, want 1 RC error and 1 async event", st)
	}
	waitFor(t, 10*time.Second, "a new link after the QP error", func() bool {
		seq++
		if err := ts[0].SendHeartbeat(1, seq); err != nil {
			t.Fatal(err)
		}
		return ts[0].VerbsStats().LinksUp >= 2
	})
	if got := ts[1].Slots().Load(0); got == 0 {
		t.Fatal("the observer's slot never advanced")
	}
	if ts[0].VerbsStats().UDHeartbeats == 0 {
		t.Fatal("no UD heartbeat while the link was down")
	}
}

// The transport reads the device's port events itself: a port going down
// and up is counted, and heartbeats reach the observer again afterwards.
func TestAsyncPortEventsConsumed(t *testing.T) {
	nd := os.Getenv("VIGIL_RXE_NETDEV")
	if os.Getenv("VIGIL_RXE_GUEST") != "1" || nd == "" {
		needDevice(t)
		t.Skip("flaps a netdev: runs only in the rxe guest")
	}
	ts, _ := cluster(t, 2)
	seq := linkUp(t, ts[0], 1)
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("/usr/sbin/ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	ip("link", "set", nd, "down")
	waitFor(t, 5*time.Second, "PortErrors counted by both transports", func() bool {
		return ts[0].VerbsStats().PortErrors >= 1 && ts[1].VerbsStats().PortErrors >= 1
	})
	ip("link", "set", nd, "up")
	waitFor(t, 10*time.Second, "port 1 ACTIVE again", func() bool {
		a, err := ts[0].ctx.QueryPort(1)
		return err == nil && a.State == ibv.PortActive
	})
	before := ts[1].Slots().Load(0)
	waitFor(t, 20*time.Second, "heartbeats arriving again after the port came back", func() bool {
		seq++
		ts[0].SendHeartbeat(1, seq) // errors while the port comes back are the transport's to handle
		return ts[1].Slots().Load(0) > before
	})
	t.Logf("after the flap: %+v", ts[0].VerbsStats())
}
