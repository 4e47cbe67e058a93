package verbs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/vigil-hpc/vigil/transport"
)

// These tests need a real RDMA device. lab/rxe/run.sh runs them on soft-RoCE in
// a qemu guest, where /init sets VIGIL_RXE_GUEST=1 (a missing device there
// is a failure, not a skip), VIGIL_RXE_DEV and VIGIL_RXE_NETDEV.

func inGuest() bool { return os.Getenv("VIGIL_RXE_GUEST") == "1" }

// testDevices is Devices looked up once per test binary (it reads every
// GID table entry in sysfs, about a second in the emulated guest).
var testDevices = sync.OnceValues(Devices)

// needDevice skips the test when the machine has no RDMA device at all, and
// fails it on any other discovery error.
func needDevice(t testing.TB) []DeviceInfo {
	t.Helper()
	devs, err := testDevices()
	if errors.Is(err, ErrNoDevice) {
		if inGuest() {
			t.Fatalf("no RDMA device inside the rxe guest: %v", err)
		}
		t.Skip("no RDMA device: run make rxe-test")
	}
	if err != nil {
		t.Fatalf("Devices: %v", err)
	}
	return devs
}

// openCtx opens the test device; the context is closed (and must close
// cleanly) at the end of the test.
func openCtx(t testing.TB) *Context {
	t.Helper()
	needDevice(t)
	c, err := Open(os.Getenv("VIGIL_RXE_DEV"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Context.Close: %v", err)
		}
	})
	return c
}

// must(f())(t) returns f's value or fails the test with its error.
func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// rcPair is two RC QPs of one device connected to each other, each with its
// own send and receive CQ, and a slot array registered for remote write on
// the B side.
type rcPair struct {
	c        *Context
	pd       *PD
	a, b     *QP
	aSend    *CQ
	bRecv    *CQ
	slotsMem *Mem
	slots    *MR
}

const nSlots = 64

func newRCPair(t testing.TB, c *Context, p *RCParams) *rcPair {
	t.Helper()
	r := &rcPair{c: c}
	r.pd = must(c.AllocPD())(t)
	r.aSend = must(c.CreateCQ(256, false))(t)
	aRecv := must(c.CreateCQ(256, false))(t)
	bSend := must(c.CreateCQ(256, false))(t)
	r.bRecv = must(c.CreateCQ(256, true))(t)
	netdev := os.Getenv("VIGIL_RXE_NETDEV")
	r.a = must(r.pd.CreateQP(QPConfig{Type: RC, SendCQ: r.aSend, RecvCQ: aRecv, Netdev: netdev}))(t)
	r.b = must(r.pd.CreateQP(QPConfig{Type: RC, SendCQ: bSend, RecvCQ: r.bRecv, Netdev: netdev}))(t)
	if err := r.a.Connect(r.b.Endpoint(), p); err != nil {
		t.Fatalf("A.Connect: %v", err)
	}
	if err := r.b.Connect(r.a.Endpoint(), p); err != nil {
		t.Fatalf("B.Connect: %v", err)
	}
	// One page mapped, only the first nSlots words registered: the words
	// after them are the "outside" of the slot array.
	r.slotsMem = must(Mmap(4096))(t)
	t.Cleanup(func() { r.slotsMem.Close() })
	r.slots = must(r.pd.Register(r.slotsMem, 0, nSlots*8, AccessRemoteWrite))(t)
	return r
}

// waitWord spins until *p == want or the deadline passes.
func waitWord(t testing.TB, p *uint64, want uint64, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		v := atomic.LoadUint64(p)
		if v == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("word = %d, want %d after %v", v, want, d)
		}
		time.Sleep(10 * time.Microsecond)
	}
}

func TestDevices(t *testing.T) {
	devs := needDevice(t)
	for _, d := range devs {
		t.Logf("device %s guid %016x netdevs %v", d.Name, d.GUID, d.Netdevs)
	}
	c := openCtx(t)
	t.Logf("opened %s: %+v", c.Name(), c.Attr())
	if c.Attr().PhysPortCnt < 1 {
		t.Fatalf("PhysPortCnt = %d", c.Attr().PhysPortCnt)
	}
	ports := must(c.Ports())(t)
	p := ports[0]
	t.Logf("port %d: %v mtu %d/%d %v gid_tbl_len %d", p.Port, p.State, p.ActiveMTU.Bytes(), p.MaxMTU.Bytes(), p.LinkLayer, p.GIDTableLen)
	if p.State != PortActive {
		t.Errorf("port 1 state %v, want ACTIVE", p.State)
	}
	tab := must(c.GIDTable(1))(t)
	if len(tab) == 0 {
		t.Fatal("empty GID table")
	}
	for _, e := range tab {
		t.Logf("GID[%d] %v type %q netdev %q", e.Index, e.GID, e.Type, e.Netdev)
	}
	pref := must(c.PreferredGID(1, ""))(t)
	t.Logf("preferred GID[%d] %v %q", pref.Index, pref.GID, pref.Type)
	if p.LinkLayer == LinkLayerEthernet {
		if pref.Type != GIDTypeRoCEv2 {
			t.Errorf("preferred GID type %q, want %q", pref.Type, GIDTypeRoCEv2)
		}
		if pref.GID.IP().To4() == nil {
			// Fine on a host whose netdev has only IPv6, but in the rxe
			// guest veth0 has an IPv4 address.
			if inGuest() {
				t.Errorf("preferred GID %v is not IPv4-mapped", pref.GID)
			}
		}
	}
	if nd := os.Getenv("VIGIL_RXE_NETDEV"); nd != "" {
		dev, err := DeviceForNetdev(nd)
		if err != nil || dev != c.Name() {
			t.Errorf("DeviceForNetdev(%s) = %q, %v; want %s", nd, dev, err, c.Name())
		}
		found := false
		for _, n := range NetdevsForDevice(c.Name()) {
			found = found || n == nd
		}
		if !found {
			t.Errorf("NetdevsForDevice(%s) = %v, want %s in it", c.Name(), NetdevsForDevice(c.Name()), nd)
		}
		if _, err := DeviceForNetdev("lo"); err == nil {
			t.Errorf("DeviceForNetdev(lo) found a device")
		}
	}
}

// TestRCWriteLoopback writes heartbeat sequence numbers with the Writer from
// QP A into B's registered slot words, read with sync/atomic through
// transport.SlotsOver.
func TestRCWriteLoopback(t *testing.T) {
	c := openCtx(t)
	r := newRCPair(t, c, nil)
	if s := must(r.a.State())(t); s != QPRTS {
		t.Fatalf("A state %v, want RTS", s)
	}
	w := must(r.a.NewWriter(16))(t)
	// The Writer owns A's send CQ now: other posts and polls are refused.
	if err := r.a.PostSendInline(1, []byte("x"), true); err == nil {
		t.Errorf("PostSendInline on a Writer's QP succeeded")
	}
	if _, err := r.aSend.Poll(make([]WC, 1)); err == nil {
		t.Errorf("Poll of a Writer's CQ succeeded")
	}
	if _, err := r.a.NewRecvRing(4, 64); err != nil {
		t.Errorf("RecvRing on A's own receive CQ: %v", err)
	}
	slots := transport.SlotsOver(r.slots.Words())
	words := r.slots.Words()
	remote := r.slots.Remote()

	// One write, seen by the observer's load.
	start := time.Now()
	if err := w.Write(remote.Word(5), 1); err != nil {
		t.Fatalf("Write: %v", err)
	}
	waitWord(t, &words[5], 1, 5*time.Second)
	t.Logf("first write visible after %v", time.Since(start))
	if got := slots.Load(5); got != 1 {
		t.Fatalf("Slots.Load(5) = %d", got)
	}

	// Many writes (the send queue wraps many times), every 16th signalled.
	const n = 5000
	start = time.Now()
	for i := uint64(2); i <= n; i++ {
		if err := w.Write(remote.Word(int(i%nSlots)), i); err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
	}
	if err := w.Sync(5 * time.Second); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	el := time.Since(start)
	for k := 0; k < nSlots; k++ {
		// the last i <= n with i%64 == k
		want := uint64(n - (n-k)%nSlots)
		if k == 1 && want < 2 {
			want = 1
		}
		if got := atomic.LoadUint64(&words[k]); got != want {
			t.Errorf("slot %d = %d, want %d", k, got, want)
		}
	}
	st := w.Stats()
	t.Logf("%d writes in %v (%.0f ns/write) stats %+v", n-1, el, float64(el.Nanoseconds())/(n-1), st)
	if st.Posted != st.Retired || st.Errors != 0 {
		t.Errorf("stats %+v: want every WR retired, no error", st)
	}
	if st.Posted < n || st.Posted > n+1 {
		t.Errorf("Posted = %d, want %d (+1 fence)", st.Posted, n)
	}
	if st.FullWaits == 0 {
		t.Logf("send queue never full")
	}
}

// TestWriteNoAllocs checks the heartbeat fast path does not allocate.
func TestWriteNoAllocs(t *testing.T) {
	c := openCtx(t)
	r := newRCPair(t, c, nil)
	w := must(r.a.NewWriter(0))(t)
	to := r.slots.Remote().Word(3)
	var v uint64
	allocs := testing.AllocsPerRun(2000, func() {
		v++
		if err := w.Write(to, v); err != nil {
			t.Fatal(err)
		}
	})
	if err := w.Sync(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Errorf("Writer.Write allocates %.1f times per call", allocs)
	}
	if got := atomic.LoadUint64(&r.slots.Words()[3]); got != v {
		t.Errorf("slot = %d, want %d", got, v)
	}
}

// TestRemoteAccess: an RDMA WRITE outside the registered slot array, with a
// wrong rkey, or into a region without remote write access completes with
// IBV_WC_REM_ACCESS_ERR and leaves the target memory unchanged.
func TestRemoteAccess(t *testing.T) {
	const sentinel = 0x5afe5afe5afe5afe
	cases := []struct {
		name string
		to   func(r *rcPair, ro *MR) RemoteAddr
		word func(r *rcPair, ro *MR) *uint64 // the memory the write aims at
	}{
		{"outside-slot-array",
			func(r *rcPair, _ *MR) RemoteAddr { return r.slots.Remote().Word(nSlots) },
			func(r *rcPair, _ *MR) *uint64 { return (*uint64)(unsafe.Pointer(&r.slotsMem.Bytes()[nSlots*8])) }},
		{"before-slot-array",
			func(r *rcPair, _ *MR) RemoteAddr {
				m := r.slots.Remote()
				return RemoteAddr{Addr: m.Addr - 64, RKey: m.RKey}
			},
			nil},
		{"straddling-end",
			func(r *rcPair, _ *MR) RemoteAddr {
				m := r.slots.Remote()
				return RemoteAddr{Addr: m.Addr + m.Len - 4, RKey: m.RKey}
			},
			func(r *rcPair, _ *MR) *uint64 { return &r.slots.Words()[nSlots-1] }},
		{"wrong-rkey",
			func(r *rcPair, _ *MR) RemoteAddr {
				return RemoteAddr{Addr: r.slots.Addr(), RKey: r.slots.RKey() ^ 0x5a5a00}
			},
			func(r *rcPair, _ *MR) *uint64 { return &r.slots.Words()[0] }},
		{"no-remote-write-access",
			func(_ *rcPair, ro *MR) RemoteAddr { return ro.Remote().Word(0) },
			func(_ *rcPair, ro *MR) *uint64 { return &ro.Words()[0] }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := openCtx(t)
			r := newRCPair(t, c, &RCParams{Timeout: 14, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 12,
				MaxRdAtomic: 1, MaxDestRdAtomic: 1, HopLimit: 64})
			ro := must(r.pd.AllocMR(4096, AccessRemoteRead))(t)
			// Fill the whole mapping with a sentinel: nothing may change.
			for _, m := range [][]byte{r.slotsMem.Bytes(), ro.Bytes()} {
				ws := unsafe.Slice((*uint64)(unsafe.Pointer(&m[0])), len(m)/8)
				for i := range ws {
					ws[i] = sentinel
				}
			}
			before := append([]byte(nil), r.slotsMem.Bytes()...)
			roBefore := append([]byte(nil), ro.Bytes()...)

			w := must(r.a.NewWriter(0))(t)
			if err := w.Write(tc.to(r, ro), 42); err != nil {
				t.Fatalf("Write posted with error: %v", err)
			}
			err := w.Sync(5 * time.Second)
			var wce *WCError
			if !errors.As(err, &wce) || wce.Status != WCRemAccessErr {
				t.Fatalf("Sync = %v, want a %v completion", err, WCRemAccessErr)
			}
			t.Logf("completion: %v", err)
			if tc.word != nil {
				if got := atomic.LoadUint64(tc.word(r, ro)); got != sentinel {
					t.Errorf("target word = %#x, want sentinel %#x", got, uint64(sentinel))
				}
			}
			if !bytes.Equal(before, r.slotsMem.Bytes()) || !bytes.Equal(roBefore, ro.Bytes()) {
				t.Errorf("target memory changed")
			}
			// The error is sticky, the requester QP is in error.
			if err := w.Write(r.slots.Remote().Word(0), 1); !errors.As(err, &wce) {
				t.Errorf("Write after the error = %v, want the sticky *WCError", err)
			}
			if s := must(r.a.State())(t); s != QPErr {
				t.Errorf("requester QP state %v, want ERR", s)
			}
			for {
				ev, ok, err := c.AsyncEvent(50 * time.Millisecond)
				if err != nil {
					t.Fatalf("AsyncEvent: %v", err)
				}
				if !ok {
					break
				}
				t.Logf("async event: %v", ev)
			}
		})
	}
}

// TestRCRetryExceeded: with a short timeout and one retry, a write to a
// peer whose QP is gone fails with IBV_WC_RETRY_EXC_ERR soon; a SEND to a
// peer with no receive posted and rnr_retry 0 fails with
// IBV_WC_RNR_RETRY_EXC_ERR.
func TestRCRetryExceeded(t *testing.T) {
	t.Run("dead-peer", func(t *testing.T) {
		c := openCtx(t)
		p := DefaultRCParams()
		p.Timeout, p.RetryCnt = 8, 1 // 1 ms per try
		r := newRCPair(t, c, &p)
		w := must(r.a.NewWriter(1))(t)
		if err := r.b.Close(); err != nil {
			t.Fatalf("close B: %v", err)
		}
		start := time.Now()
		if err := w.Write(r.slots.Remote().Word(0), 7); err != nil {
			t.Fatalf("Write: %v", err)
		}
		err := w.Sync(10 * time.Second)
		var wce *WCError
		if !errors.As(err, &wce) || wce.Status != WCRetryExcErr {
			t.Fatalf("Sync = %v, want %v", err, WCRetryExcErr)
		}
		t.Logf("dead peer detected by the QP after %v: %v", time.Since(start), err)
	})
	t.Run("rnr", func(t *testing.T) {
		c := openCtx(t)
		p := DefaultRCParams()
		p.RNRRetry, p.MinRNRTimer = 0, 1
		r := newRCPair(t, c, &p)
		if err := r.a.PostSendInline(9, []byte("no receive posted"), true); err != nil {
			t.Fatal(err)
		}
		wc := waitWC(t, r.aSend, 5*time.Second)
		if wc.Status != WCRNRRetryExcErr || wc.WRID != 9 {
			t.Fatalf("completion %+v (%v), want %v", wc, wc.Err(), WCRNRRetryExcErr)
		}
		t.Logf("completion: %v", wc.Err())
	})
}

func waitWC(t testing.TB, cq *CQ, d time.Duration) WC {
	t.Helper()
	wcs := make([]WC, 1)
	deadline := time.Now().Add(d)
	for {
		n, err := cq.Poll(wcs)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return wcs[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no completion after %v", d)
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// TestRCSendRecv: SENDs into a receive ring, woken through the receive CQ's
// completion channel, with the ring replenished many times over.
func TestRCSendRecv(t *testing.T) {
	c := openCtx(t)
	r := newRCPair(t, c, nil)
	ring := must(r.b.NewRecvRing(8, 256))(t)
	const n = 40
	got := 0
	handle := func(wc *WC, m []byte) {
		if err := wc.Err(); err != nil {
			t.Fatalf("recv completion: %v", err)
		}
		if want := fmt.Sprintf("message %d", got); string(m) != want {
			t.Fatalf("received %q, want %q", m, want)
		}
		got++
	}
	for i := 0; i < n; i++ {
		msg := []byte(fmt.Sprintf("message %d", i))
		if err := r.a.PostSendInline(uint64(i), msg, true); err != nil {
			t.Fatalf("PostSendInline %d: %v", i, err)
		}
		if wc := waitWC(t, r.aSend, 5*time.Second); wc.Status != WCSuccess || wc.Opcode != WCSend || wc.WRID != uint64(i) {
			t.Fatalf("send completion %+v: %v", wc, wc.Err())
		}
		// Receive: poll, arm, poll, wait on the channel.
		deadline := time.Now().Add(5 * time.Second)
		for got <= i {
			k, err := ring.Poll(handle)
			if err != nil {
				t.Fatal(err)
			}
			if k > 0 {
				continue
			}
			if err := r.bRecv.Arm(false); err != nil {
				t.Fatal(err)
			}
			if k, err = ring.Poll(handle); err != nil || k > 0 {
				if err != nil {
					t.Fatal(err)
				}
				continue
			}
			if time.Now().After(deadline) {
				t.Fatalf("message %d not received", i)
			}
			if _, err := r.bRecv.Wait(time.Second); err != nil {
				t.Fatalf("Wait: %v", err)
			}
		}
	}
	// The last batch is reposted by the next Poll.
	if _, err := ring.Poll(func(*WC, []byte) { t.Fatal("unexpected completion") }); err != nil {
		t.Fatal(err)
	}
	if ring.Reposted() != n {
		t.Errorf("reposted %d buffers, want %d", ring.Reposted(), n)
	}
}

// TestUDSendRecv: datagrams both ways between two UD QPs through address
// handles, into receive rings (GRH stripped), more than a ring's worth.
func TestUDSendRecv(t *testing.T) {
	c := openCtx(t)
	pd := must(c.AllocPD())(t)
	netdev := os.Getenv("VIGIL_RXE_NETDEV")
	mk := func() (*QP, *CQ, *RecvRing) {
		scq := must(c.CreateCQ(64, false))(t)
		rcq := must(c.CreateCQ(64, false))(t)
		qp := must(pd.CreateQP(QPConfig{Type: UD, SendCQ: scq, RecvCQ: rcq, Netdev: netdev}))(t)
		if s := must(qp.State())(t); s != QPRTS {
			t.Fatalf("UD QP state %v, want RTS", s)
		}
		return qp, scq, must(qp.NewRecvRing(4, 512))(t)
	}
	a, aSend, aRing := mk()
	b, bSend, bRing := mk()
	toB := UDDest{AH: must(a.CreateAHFor(b.Endpoint()))(t), QPN: b.Num(), QKey: b.Endpoint().QKey}
	toA := UDDest{AH: must(b.CreateAHFor(a.Endpoint()))(t), QPN: a.Num(), QKey: a.Endpoint().QKey}

	exchange := func(from *QP, fromSend *CQ, dest UDDest, ring *RecvRing, payload string) {
		t.Helper()
		if err := from.PostSendUD(7, dest, []byte(payload), true); err != nil {
			t.Fatalf("PostSendUD: %v", err)
		}
		if wc := waitWC(t, fromSend, 5*time.Second); wc.Status != WCSuccess {
			t.Fatalf("UD send completion: %v", wc.Err())
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			var msg string
			var src uint32
			k, err := ring.Poll(func(wc *WC, m []byte) {
				if err := wc.Err(); err != nil {
					t.Fatalf("UD recv: %v", err)
				}
				msg, src = string(m), wc.SrcQP
			})
			if err != nil {
				t.Fatal(err)
			}
			if k == 1 {
				if msg != payload || src != from.Num() {
					t.Fatalf("received %q from QP %d, want %q from %d", msg, src, payload, from.Num())
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("datagram %q not received", payload)
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
	for i := 0; i < 10; i++ {
		exchange(a, aSend, toB, bRing, fmt.Sprintf("ping %d", i))
		exchange(b, bSend, toA, aRing, fmt.Sprintf("pong %d", i))
	}
	// A wrong Q_Key is dropped by the receiver.
	bad := toB
	bad.QKey ^= 1
	if err := a.PostSendUD(8, bad, []byte("wrong qkey"), true); err != nil {
		t.Fatal(err)
	}
	waitWC(t, aSend, 5*time.Second)
	time.Sleep(50 * time.Millisecond)
	if k, _ := bRing.Poll(func(_ *WC, m []byte) { t.Errorf("received %q despite a wrong Q_Key", m) }); k != 0 {
		t.Errorf("%d datagrams with a wrong Q_Key delivered", k)
	}
}

// rdmaResCounts returns the per-device object counts of `rdma resource
// show` (pd, cq, qp, mr, ctx...), or nil if the tool is missing.
func rdmaResCounts(t testing.TB, dev string) map[string]int {
	t.Helper()
	path, err := exec.LookPath("rdma")
	if err != nil {
		return nil
	}
	out, err := exec.Command(path, "resource", "show").CombinedOutput()
	if err != nil {
		t.Fatalf("rdma resource show: %v: %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[1] != dev+":" {
			continue
		}
		m := map[string]int{}
		for i := 2; i+1 < len(f); i += 2 {
			if n, err := strconv.Atoi(f[i+1]); err == nil {
				m[f[i]] = n
			}
		}
		return m
	}
	t.Fatalf("rdma resource show has no line for %s:\n%s", dev, out)
	return nil
}

// TestCloseNoLeaks: every object is freed by Close, in reverse order; the
// kernel's resource counts (rdma resource show) return to where they were;
// freeing out of order fails with the verbs call named.
func TestCloseNoLeaks(t *testing.T) {
	devs := needDevice(t)
	dev := os.Getenv("VIGIL_RXE_DEV")
	if dev == "" {
		dev = devs[0].Name
	}
	before := rdmaResCounts(t, dev) // before Open: the kernel's own objects only
	c, err := Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	if before == nil {
		if inGuest() {
			t.Fatal("rdma tool missing in the guest")
		}
		t.Log("rdma tool not found: checking Close errors only")
	}
	pd := must(c.AllocPD())(t)
	scq := must(c.CreateCQ(64, true))(t)
	rcq := must(c.CreateCQ(64, false))(t)
	qp := must(pd.CreateQP(QPConfig{Type: RC, SendCQ: scq, RecvCQ: rcq}))(t)
	if err := qp.Connect(qp.Endpoint(), nil); err != nil { // a QP connected to itself
		t.Fatal(err)
	}
	mr := must(pd.AllocMR(4096, AccessRemoteWrite))(t)
	w := must(qp.NewWriter(0))(t)
	ring := must(qp.NewRecvRing(16, 128))(t)
	ud := must(pd.CreateQP(QPConfig{Type: UD, SendCQ: scq, RecvCQ: rcq}))(t)
	ah := must(ud.CreateAHFor(ud.Endpoint()))(t)
	_ = ah
	if err := w.Write(mr.Remote().Word(1), 99); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitWord(t, &mr.Words()[1], 99, time.Second)

	if before != nil {
		during := rdmaResCounts(t, dev)
		t.Logf("rdma resource show: before %v, while open %v", before, during)
		for k, d := range map[string]int{"ctx": 1, "pd": 1, "cq": 2, "qp": 2, "mr": 2} {
			if during[k]-before[k] != d {
				t.Errorf("%s count grew by %d, want %d", k, during[k]-before[k], d)
			}
		}
	}

	// Out of order: the PD still has MRs, QPs and an AH.
	err = pd.Close()
	if !errors.Is(err, syscall.EBUSY) || !strings.Contains(err.Error(), "ibv_dealloc_pd") {
		t.Errorf("PD.Close with live children = %v, want ibv_dealloc_pd EBUSY", err)
	}
	if c.live() != 9 {
		t.Errorf("live objects %d, want 9", c.live())
	}
	if err := ring.Close(); err != nil { // explicit close of one object
		t.Fatal(err)
	}
	if err := ring.Close(); err != nil { // twice is a no-op
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Context.Close: %v", err)
	}
	if c.live() != 0 {
		t.Errorf("%d objects left after Close", c.live())
	}
	if _, err := c.AllocPD(); err == nil {
		t.Errorf("AllocPD on a closed context succeeded")
	}
	if before != nil {
		after := rdmaResCounts(t, dev)
		t.Logf("rdma resource show after Close: %v", after)
		for k, v := range before {
			if after[k] != v {
				t.Errorf("%s: %d after Close, %d before", k, after[k], v)
			}
		}
	}
}

// TestAsyncPortEvents takes the rxe netdev down and up and expects
// IBV_EVENT_PORT_ERR then IBV_EVENT_PORT_ACTIVE. Only in the rxe guest: it
// disturbs the device.
func TestAsyncPortEvents(t *testing.T) {
	nd := os.Getenv("VIGIL_RXE_NETDEV")
	if !inGuest() || nd == "" {
		needDevice(t)
		t.Skip("flaps a netdev: runs only in the rxe guest")
	}
	c := openCtx(t)
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("/usr/sbin/ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	expect := func(want AsyncEventType) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			ev, ok, err := c.AsyncEvent(time.Until(deadline))
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				t.Logf("async event: %v", ev)
				if ev.Type == want {
					if ev.Port != 1 {
						t.Errorf("event on port %d, want 1", ev.Port)
					}
					return
				}
			}
		}
		t.Fatalf("no %v event", want)
	}
	ip("link", "set", nd, "down")
	expect(EventPortErr)
	ip("link", "set", nd, "up")
	expect(EventPortActive)
	deadline := time.Now().Add(5 * time.Second)
	for must(c.QueryPort(1))(t).State != PortActive {
		if time.Now().After(deadline) {
			t.Fatal("port not ACTIVE again")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkRDMAWriteHeartbeat measures one heartbeat: Writer.Write of an
// inline 8-byte RDMA WRITE into a peer's slot, with the amortised
// completion handling (every 32nd WR signalled, CQ reaped in the same C
// call). Under qemu TCG the numbers are emulation numbers: compare them only
// with the C loop (lab/rxe/hbwrite.c) and perftest in the same guest.
func BenchmarkRDMAWriteHeartbeat(b *testing.B) {
	runtime.LockOSThread() // as the emitter's pinned thread
	defer runtime.UnlockOSThread()
	c := openCtx(b)
	r := newRCPair(b, c, nil)
	w := must(r.a.NewWriter(32))(b)
	to := r.slots.Remote().Word(7)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := w.Write(to, uint64(i+1)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := w.Sync(10 * time.Second); err != nil {
		b.Fatal(err)
	}
	if got := atomic.LoadUint64(&r.slots.Words()[7]); got != uint64(b.N) {
		b.Fatalf("slot = %d, want %d", got, b.N)
	}
	st := w.Stats()
	b.ReportMetric(float64(st.Polls)/float64(b.N), "polls/op")
}

// BenchmarkRDMAWriteHeartbeatInC is the same work as
// BenchmarkRDMAWriteHeartbeat with the loop in C (one cgo call per 1024
// writes): the difference between the two is the cost of the cgo crossing
// and of the Go runtime around it.
func BenchmarkRDMAWriteHeartbeatInC(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c := openCtx(b)
	r := newRCPair(b, c, nil)
	w := must(r.a.NewWriter(32))(b)
	to := r.slots.Remote().Word(7)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += 1024 {
		n := min(1024, b.N-i)
		if err := w.WriteN(to, uint64(i+1), uint64(n)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := w.Sync(10 * time.Second); err != nil {
		b.Fatal(err)
	}
	if got := atomic.LoadUint64(&r.slots.Words()[7]); got != uint64(b.N) {
		b.Fatalf("slot = %d, want %d", got, b.N)
	}
}

// BenchmarkCgoCall is the cost of one cgo call to an empty C function.
func BenchmarkCgoCall(b *testing.B) {
	needDevice(b) // an emulation number too: measured only where the others are
	x := 0
	for i := 0; i < b.N; i++ {
		x = cgoNop(x)
	}
	if x != b.N {
		b.Fatal(x)
	}
}
