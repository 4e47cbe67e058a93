package verbs

import (
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A type 2 memory window over one word of a slot array registered without
// REMOTE_WRITE, the word being also a region of its own (MR.Sub), as the
// transport sets it up: the QP connected to the one the window was bound
// through can write that word and nothing else; the array's own rkey
// grants nothing; another connection cannot use the window's rkey.
func TestMemoryWindowIsolation(t *testing.T) {
	const word = 3
	rc := &RCParams{Timeout: 14, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 12, MaxRdAtomic: 1, MaxDestRdAtomic: 1, HopLimit: 64}
	type setup struct {
		r    *rcPair
		mr   *MR
		rkey uint32
	}
	open := func(t *testing.T) setup {
		c := openCtx(t)
		if !c.Attr().MemWindowType2 {
			if inGuest() {
				t.Fatal("rxe advertises no type 2 memory windows")
			}
			t.Skip("device without type 2 memory windows")
		}
		r := newRCPair(t, c, rc)
		mr := must(r.pd.Register(r.slotsMem, 0, nSlots*8, AccessLocalWrite|AccessMWBind))(t)
		sub := must(mr.Sub(8*word, 8, AccessLocalWrite|AccessMWBind))(t)
		mw := must(r.pd.AllocMW())(t)
		rkey, err := r.b.BindMW(mw, sub, 0, 8, AccessRemoteWrite, 5*time.Second)
		if err != nil {
			t.Fatalf("BindMW: %v", err)
		}
		if rkey == mr.RKey() {
			t.Fatalf("window rkey %#x is the region's", rkey)
		}
		return setup{r, mr, rkey}
	}
	expectDenied := func(t *testing.T, q *QP, to RemoteAddr, target *uint64) {
		t.Helper()
		w := must(q.NewWriter(0))(t)
		if err := w.Write(to, 42); err != nil {
			t.Fatalf("Write posted with error: %v", err)
		}
		err := w.Sync(5 * time.Second)
		var wce *WCError
		if !errors.As(err, &wce) || wce.Status != WCRemAccessErr {
			t.Fatalf("Sync = %v, want a %v completion", err, WCRemAccessErr)
		}
		if got := atomic.LoadUint64(target); got != 0 {
			t.Fatalf("target word = %d after a denied write", got)
		}
	}
	t.Run("own-word", func(t *testing.T) {
		s := open(t)
		w := must(s.r.a.NewWriter(0))(t)
		to := RemoteAddr{Addr: s.mr.Addr() + 8*word, RKey: s.rkey}
		for v := uint64(1); v <= 100; v++ {
			if err := w.Write(to, v); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Sync(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		waitWord(t, &s.mr.Words()[word], 100, 5*time.Second)
	})
	t.Run("next-word", func(t *testing.T) {
		s := open(t)
		expectDenied(t, s.r.a, RemoteAddr{Addr: s.mr.Addr() + 8*(word+1), RKey: s.rkey}, &s.mr.Words()[word+1])
	})
	t.Run("region-rkey", func(t *testing.T) {
		s := open(t)
		expectDenied(t, s.r.a, RemoteAddr{Addr: s.mr.Addr() + 8*word, RKey: s.mr.RKey()}, &s.mr.Words()[word])
	})
	t.Run("other-connection", func(t *testing.T) {
		s := open(t)
		// A second connection in the same protection domain.
		netdev := os.Getenv("VIGIL_RXE_NETDEV")
		cq := func() *CQ { return must(s.r.c.CreateCQ(16, false))(t) }
		a2 := must(s.r.pd.CreateQP(QPConfig{Type: RC, SendCQ: cq(), RecvCQ: cq(), Netdev: netdev}))(t)
		b2 := must(s.r.pd.CreateQP(QPConfig{Type: RC, SendCQ: cq(), RecvCQ: cq(), Netdev: netdev, Access: AccessRemoteWrite}))(t)
		if err := a2.Connect(b2.Endpoint(), rc); err != nil {
			t.Fatal(err)
		}
		if err := b2.Connect(a2.Endpoint(), rc); err != nil {
			t.Fatal(err)
		}
		expectDenied(t, a2, RemoteAddr{Addr: s.mr.Addr() + 8*word, RKey: s.rkey}, &s.mr.Words()[word])
	})
	// Why the transport gives each word a region of its own: bound over a
	// word of the whole array, a window's rkey reaches the next word on
	// rxe, which checks the access against the region's range and not the
	// window's (Linux 6.1, rxe_resp.c check_rkey). A device that enforces
	// the window's range refuses it.
	t.Run("window-over-array-range", func(t *testing.T) {
		c := openCtx(t)
		if !c.Attr().MemWindowType2 {
			t.Skip("device without type 2 memory windows")
		}
		r := newRCPair(t, c, rc)
		mr := must(r.pd.Register(r.slotsMem, 0, nSlots*8, AccessLocalWrite|AccessMWBind))(t)
		mw := must(r.pd.AllocMW())(t)
		rkey, err := r.b.BindMW(mw, mr, 8*word, 8, AccessRemoteWrite, 5*time.Second)
		if err != nil {
			t.Fatalf("BindMW: %v", err)
		}
		to, target := RemoteAddr{Addr: mr.Addr() + 8*(word+1), RKey: rkey}, &mr.Words()[word+1]
		if !strings.HasPrefix(c.Name(), "rxe") {
			expectDenied(t, r.a, to, target)
			return
		}
		w := must(r.a.NewWriter(0))(t)
		if err := w.Write(to, 42); err != nil {
			t.Fatal(err)
		}
		if err := w.Sync(5 * time.Second); err != nil {
			t.Fatalf("rxe refused a write beyond the window but inside its region (%v): it now checks windows, MR.Sub per word is no longer needed there", err)
		}
		waitWord(t, target, 42, 5*time.Second)
		t.Logf("rxe: a write beyond the window landed (range checked against the region): the transport registers each word as a region of its own")
	})
}
