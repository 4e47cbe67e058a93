package verbs

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// TestSRQSharedByTwoQPs: two RC connections whose receiving ends take
// their buffers from one SRQ; SENDs on both arrive in the SRQ's buffers,
// each completion naming its QP, with buffers reposted; a QP with an SRQ
// must be RC.
func TestSRQSharedByTwoQPs(t *testing.T) {
	c := openCtx(t)
	pd := must(c.AllocPD())(t)
	netdev := os.Getenv("VIGIL_RXE_NETDEV")
	srq := must(pd.CreateSRQ(4))(t)
	recvCQ := must(c.CreateCQ(64, false))(t)
	sendCQ := must(c.CreateCQ(64, false))(t)
	const size = 4096
	mr := must(pd.AllocMR(4*size, AccessLocalWrite))(t)
	for i := range 4 {
		if err := srq.PostRecv(uint64(i), mr, i*size, size); err != nil {
			t.Fatal(err)
		}
	}
	var senders, receivers [2]*QP
	for i := range 2 {
		senders[i] = must(pd.CreateQP(QPConfig{Type: RC, SendCQ: sendCQ, Netdev: netdev}))(t)
		receivers[i] = must(pd.CreateQP(QPConfig{Type: RC, SendCQ: sendCQ, RecvCQ: recvCQ, SRQ: srq, Netdev: netdev}))(t)
		if err := senders[i].Connect(receivers[i].Endpoint(), nil); err != nil {
			t.Fatal(err)
		}
		if err := receivers[i].Connect(senders[i].Endpoint(), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pd.CreateQP(QPConfig{Type: UD, SendCQ: sendCQ, SRQ: srq, Netdev: netdev}); err == nil {
		t.Error("a UD QP was created with an SRQ")
	}
	const n = 12 // three times the SRQ's depth
	for k := range n {
		q := k % 2
		msg := []byte(fmt.Sprintf("message %d on QP %d", k, q))
		if err := senders[q].PostSendInline(uint64(k), msg, true); err != nil {
			t.Fatal(err)
		}
		if wc := waitWC(t, sendCQ, 5*time.Second); wc.Status != WCSuccess {
			t.Fatalf("send %d: %v", k, wc.Err())
		}
		wc := waitWC(t, recvCQ, 5*time.Second)
		if wc.Status != WCSuccess || wc.QPNum != receivers[q].Num() {
			t.Fatalf("receive %d: QP %d (want %d): %v", k, wc.QPNum, receivers[q].Num(), wc.Err())
		}
		i := int(wc.WRID)
		if got := string(mr.Bytes()[i*size : i*size+int(wc.ByteLen)]); got != string(msg) {
			t.Fatalf("receive %d: %q, want %q", k, got, msg)
		}
		if err := srq.PostRecv(uint64(i), mr, i*size, size); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if err := receivers[i].Close(); err != nil {
			t.Error(err)
		}
	}
	if err := srq.Close(); err != nil {
		t.Errorf("SRQ.Close: %v", err)
	}
}
