package verbs

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// TestRecvRingKeepsSize: a UD datagram longer than a ring buffer, sent from
// a raw UD QP, completes in error at the receiver (on rxe the receiving QP
// enters the error state too). The ring must still hold all its buffers
// afterwards: as many datagrams as it has buffers, sent back to back
// before it is polled, all arrive.
func TestRecvRingKeepsSize(t *testing.T) {
	const n = 4
	c := openCtx(t)
	pd := must(c.AllocPD())(t)
	netdev := os.Getenv("VIGIL_RXE_NETDEV")
	mk := func() (*QP, *CQ) {
		scq := must(c.CreateCQ(64, false))(t)
		rcq := must(c.CreateCQ(64, false))(t)
		return must(pd.CreateQP(QPConfig{Type: UD, SendCQ: scq, RecvCQ: rcq, Netdev: netdev}))(t), scq
	}
	a, _ := mk()
	ring := must(a.NewRecvRing(n, 64))(t) // 64-byte buffers (+ the GRH)
	b, bSend := mk()
	mr := must(pd.AllocMR(4096, AccessLocalWrite))(t)
	toA := UDDest{AH: must(b.CreateAHFor(a.Endpoint()))(t), QPN: a.Num(), QKey: a.Endpoint().QKey}
	send := func(id uint64, length int) {
		t.Helper()
		if err := b.PostSendUDFrom(id, toA, mr, 0, length, true); err != nil {
			t.Fatalf("PostSendUDFrom(%d bytes): %v", length, err)
		}
		if wc := waitWC(t, bSend, 5*time.Second); wc.Status != WCSuccess {
			t.Fatalf("send completion: %v", wc.Err())
		}
	}
	// poll polls the ring until it has seen want completions of any kind
	// (errors and flushes included) and then for 100 ms more; it returns
	// the payloads received and the error completions.
	poll := func(want int) (msgs []string, errs []WCStatus) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		quiet := time.Time{}
		seen := 0
		for quiet.IsZero() || time.Now().Before(quiet) {
			k, err := ring.Poll(func(wc *WC, m []byte) {
				if wc.Status != WCSuccess {
					errs = append(errs, wc.Status)
					return
				}
				msgs = append(msgs, string(m))
			})
			if err != nil {
				t.Fatalf("Poll: %v", err)
			}
			seen += k
			if seen >= want && quiet.IsZero() {
				quiet = time.Now().Add(100 * time.Millisecond)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d completions of %d after 5 s (payloads %q, errors %v)", seen, want, msgs, errs)
			}
			time.Sleep(50 * time.Microsecond)
		}
		return msgs, errs
	}
	send(1, 900)
	msgs, errs := poll(1)
	if len(msgs) != 0 || len(errs) == 0 || errs[0] == WCWRFlushErr {
		t.Fatalf("after a 900-byte datagram into 64-byte buffers: payloads %q, error completions %v; want a non-flush error first",
			msgs, errs)
	}
	t.Logf("oversized datagram: receive completions %v", errs)
	for i := range n {
		copy(mr.Bytes(), fmt.Sprintf("after %d", i))
		send(uint64(10+i), len("after 0"))
	}
	msgs, errs = poll(n)
	if len(msgs) != n || len(errs) != 0 {
		t.Fatalf("%d datagrams sent back to back after the error: received %q, error completions %v; want all %d",
			n, msgs, errs, n)
	}
	for i, m := range msgs {
		if want := fmt.Sprintf("after %d", i); m != want {
			t.Errorf("datagram %d: %q, want %q", i, m, want)
		}
	}
	if s := must(a.State())(t); s != QPRTS {
		t.Errorf("receiving QP in state %v, want RTS", s)
	}
	t.Logf("ring: errors by status %v, flushed %d, QP recoveries %d", ring.Errors(), ring.Flushed(), ring.Recoveries())
	total := uint64(0)
	for _, k := range ring.Errors() {
		total += k
	}
	if total != 1 {
		t.Errorf("errors by status %v, want one", ring.Errors())
	}
}
