package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/node"
)

// kindOf returns the index of name in node.MsgKinds.
func kindOf(t *testing.T, name string) int {
	t.Helper()
	for i, k := range node.MsgKinds {
		if k == name {
			return i
		}
	}
	t.Fatalf("no message kind %q", name)
	return -1
}

// TestStatsByKind: after a crash and an agreement among the survivors,
// the per-kind counters show the broadcast, the ring's repair and the
// agreement's messages on both sides, with their bytes, and every message
// received was sent. The crash is in every survivor's Record (a new one,
// the one taken before telling of it by Changed) and counted once as
// learned, once as reported.
func TestStatsByKind(t *testing.T) {
	const n = 4
	h, δ := 5*time.Millisecond, 100*time.Millisecond
	c := startCluster(t, n, node.Config{HeartbeatPeriod: h, SuspectTimeout: δ, StartGrace: δ})
	time.Sleep(3 * δ)
	before := c.nodes[0].Record()
	c.kill(2)
	c.waitComplete(5 * time.Second)
	c.waitRing(5 * time.Second)
	select {
	case <-before.Changed():
	default:
		t.Error("the Record taken before the crash was not told of a newer one")
	}
	if before.Len() != 0 {
		t.Errorf("the Record taken before the crash holds %d ranks", before.Len())
	}
	var reported uint64
	for i, nd := range c.nodes {
		if i == 2 {
			continue
		}
		rec, st := nd.Record(), nd.Stats()
		ev, ok := rec.Known(2)
		if rec.Len() != 1 || rec.Rank(0) != 2 || rec.Event(0) != ev || !ok || ev.Left {
			t.Errorf("rank %d: a record of %d ranks, Known(2) = %+v, %v", i, rec.Len(), ev, ok)
		}
		if stopped, _, _, _ := rec.Stopped(); stopped {
			t.Errorf("rank %d: a record of a stopped node", i)
		}
		if st.DeathsLearned != 1 || st.Departures != 0 {
			t.Errorf("rank %d: %d deaths learned, %d departures", i, st.DeathsLearned, st.Departures)
		}
		reported += st.Reported
	}
	if reported != 1 {
		t.Errorf("the crash reported %d times", reported)
	}
	results := make(chan error, n)
	for i, nd := range c.nodes {
		if i == 2 {
			continue
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := nd.Agree(ctx, node.OpAND, []byte{1})
			results <- err
		}()
	}
	for range n - 1 {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	var sent, recv [node.NumMsgKinds]uint64
	for i, nd := range c.nodes {
		if i == 2 {
			continue
		}
		st := nd.Stats()
		var total node.KindStats
		for k, ks := range st.ByKind {
			sent[k] += ks.Sent
			recv[k] += ks.Recv
			total.Sent += ks.Sent
			total.Recv += ks.Recv
			if (ks.Sent > 0) != (ks.BytesSent > 0) || (ks.Recv > 0) != (ks.BytesRecv > 0) || ks.BytesSent < ks.Sent {
				t.Errorf("rank %d, %s: %+v", i, node.MsgKinds[k], ks)
			}
		}
		if st.ByKind[kindOf(t, "agree")].Sent == 0 || st.ByKind[kindOf(t, "agree")].Recv == 0 {
			t.Errorf("rank %d: agreement messages %+v", i, st.ByKind[kindOf(t, "agree")])
		}
		if total.Recv > st.Transport.MsgsRecv {
			t.Errorf("rank %d: %d messages received by kind, %d by the transport", i, total.Recv, st.Transport.MsgsRecv)
		}
	}
	for _, k := range []string{"bcast", "newobserver", "agree"} {
		if i := kindOf(t, k); sent[i] == 0 || recv[i] == 0 {
			t.Errorf("%s: %d sent, %d received by the survivors", k, sent[i], recv[i])
		}
	}
	t.Logf("sent %v, received %v (%v)", sent, recv, node.MsgKinds)
}
