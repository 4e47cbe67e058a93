package verbs

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/ranks"
)

// seqMsg is message i of size bytes (at least 8): i, then a pattern of i.
func seqMsg(i, size int) []byte {
	b := make([]byte, max(size, 8))
	binary.LittleEndian.PutUint64(b, uint64(i))
	for j := 8; j < len(b); j++ {
		b[j] = byte(i*7 + j)
	}
	return b
}

// checkSeq returns the index of a seqMsg message, or an error if its bytes
// are not intact.
func checkSeq(b []byte) (int, error) {
	if len(b) < 8 {
		return -1, fmt.Errorf("%d bytes", len(b))
	}
	i := int(binary.LittleEndian.Uint64(b))
	for j := 8; j < len(b); j++ {
		if b[j] != byte(i*7+j) {
			return i, fmt.Errorf("message %d (%d bytes): byte %d is %#x, want %#x", i, len(b), j, b[j], byte(i*7+j))
		}
	}
	return i, nil
}

// seqSink records, per sender, the indexes of the seqMsg messages it got.
type seqSink struct {
	mu   sync.Mutex
	got  map[ranks.Rank][]int
	errs []error
}

func newSeqSink() *seqSink { return &seqSink{got: map[ranks.Rank][]int{}} }

func (s *seqSink) handler(from ranks.Rank, p []byte) {
	i, err := checkSeq(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.errs = append(s.errs, err)
	}
	s.got[from] = append(s.got[from], i)
}

func (s *seqSink) count(from ranks.Rank) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got[from])
}

// verify fails unless from's messages 0..n-1 arrived intact, in order,
// each once.
func (s *seqSink) verify(t *testing.T, from ranks.Rank, n int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, err := range s.errs {
		t.Error(err)
	}
	got := s.got[from]
	if len(got) != n {
		t.Errorf("from rank %d: %d messages, want %d", from, len(got), n)
	}
	for i, g := range got {
		if g != i {
			t.Fatalf("from rank %d: message %d is #%d (order or duplicate): %v", from, i, g, got)
		}
	}
}

// await polls cond every 2 ms for up to 60 s (from any goroutine).
func await(cond func() bool) bool {
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// seqCluster starts n transports whose handlers are seqSinks.
func seqCluster(t *testing.T, n int, job uint64) ([]*Transport, []*seqSink) {
	t.Helper()
	ts := openAll(t, n, job)
	sinks := make([]*seqSink, n)
	addrs := addrsOf(ts)
	for i, tr := range ts {
		sinks[i] = newSeqSink()
		if err := tr.Start(addrs, sinks[i].handler); err != nil {
			t.Fatal(err)
		}
	}
	return ts, sinks
}

// rcSent is how many messages tr sent to peer over RC (a seq each).
func rcSent(tr *Transport, peer ranks.Rank) uint64 {
	var n uint64
	tr.do(func(st *state) {
		if st.ml != nil {
			n = st.ml.out[peer]
		}
	})
	return n
}

// Large messages (4 KiB, 64 KiB, 1 MiB) interleaved with small ones, both
// ways at once, arrive intact, in order and once, and the large ones take
// an RC message link once it is up.
func TestRCMessagesInOrder(t *testing.T) {
	ts, sinks := seqCluster(t, 2, 501)
	sizes := []int{10, 4 << 10, 100, 64 << 10, 8, 1 << 20, 30, 4<<10 + 1, 64<<10 - 3, 0}
	const rounds = 6
	n := rounds * len(sizes)
	var wg sync.WaitGroup
	for from := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			to := ranks.Rank(1 - from)
			for i := range n {
				if err := ts[from].Send(to, seqMsg(i, sizes[i%len(sizes)])); err != nil {
					t.Errorf("rank %d Send %d: %v", from, i, err)
					return
				}
				switch {
				case i == len(sizes)-1:
					// The first round went over UD and asked for the link.
					if !await(func() bool { return ts[from].VerbsStats().RCMsgLinks > 0 }) {
						t.Errorf("rank %d: no message link after 60 s", from)
						return
					}
				case i%len(sizes) == len(sizes)-1:
					// At most two rounds (2.3 MB) unconfirmed: a link, like
					// the UD channel, holds ≈ 3.9 MB for a peer.
					if !await(func() bool { return sinks[to].count(ranks.Rank(from)) >= i+1-len(sizes) }) {
						t.Errorf("rank %d: round %d not delivered after 60 s", from, i/len(sizes)-1)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	waitFor(t, 60*time.Second, "every message delivered", func() bool {
		return sinks[0].count(1) >= n && sinks[1].count(0) >= n
	})
	time.Sleep(50 * time.Millisecond) // a duplicate would show now
	sinks[1].verify(t, 0, n)
	sinks[0].verify(t, 1, n)
	for i, tr := range ts {
		vs := tr.VerbsStats()
		t.Logf("rank %d: %d over RC, %+v", i, rcSent(tr, ranks.Rank(1-i)), vs)
		if vs.RCMsgLinks == 0 || rcSent(tr, ranks.Rank(1-i)) == 0 {
			t.Errorf("rank %d: no message went over an RC message link", i)
		}
		if tr.Stats().MsgsDropped != 0 {
			t.Errorf("rank %d dropped %d messages", i, tr.Stats().MsgsDropped)
		}
	}
}

// With more peers than the pool holds, the least recently used idle link
// is evicted and every message still arrives in order.
func TestRCMessageLinkEviction(t *testing.T) {
	const n = rcPool + 3
	ts, sinks := seqCluster(t, n, 502)
	const rounds = 4
	for r := range rounds {
		for p := 1; p < n; p++ {
			for k := range 2 {
				if err := ts[0].Send(ranks.Rank(p), seqMsg(2*r+k, 8<<10)); err != nil {
					t.Fatal(err)
				}
			}
			// One peer at a time: the links to the others are idle
			// (a busy link is not evicted).
			waitFor(t, 30*time.Second, "delivery", func() bool { return sinks[p].count(0) >= 2*r+2 })
		}
	}
	waitFor(t, 60*time.Second, "every message delivered", func() bool {
		for p := 1; p < n; p++ {
			if sinks[p].count(0) < 2*rounds {
				return false
			}
		}
		return true
	})
	time.Sleep(50 * time.Millisecond)
	for p := 1; p < n; p++ {
		sinks[p].verify(t, 0, 2*rounds)
	}
	var up, pending []ranks.Rank
	ts[0].do(func(st *state) { up, pending = st.msgLinkPeers() })
	vs := ts[0].VerbsStats()
	t.Logf("rank 0: links up %v pending %v, %+v", up, pending, vs)
	if len(up)+len(pending) > rcPool {
		t.Errorf("rank 0 holds %d message links, pool is %d", len(up)+len(pending), rcPool)
	}
	if vs.RCMsgEvicted == 0 {
		t.Errorf("no link evicted with %d peers and a pool of %d", n-1, rcPool)
	}
	if r := ts[0].Resources(); r.QPs > 1+rcPool+2 {
		t.Errorf("rank 0 resources %+v: more QPs than the UD QP, the pool and heartbeat links", r)
	}

	// A frequent partner without a link does not evict one: small
	// messages to an evicted peer stay on UD while the pool is full.
	var linked map[ranks.Rank]bool
	ts[0].do(func(st *state) {
		linked = map[ranks.Rank]bool{}
		for p := range st.ml.links {
			linked[p] = true
		}
	})
	var cold ranks.Rank
	for p := ranks.Rank(1); p < n; p++ {
		if !linked[p] {
			cold = p
			break
		}
	}
	if len(linked) < rcPool || cold == 0 {
		t.Fatalf("links to %v: want a full pool and a peer without one", linked)
	}
	evicted := ts[0].VerbsStats().RCMsgEvicted
	for k := range 2 * rcHotMsgs {
		if err := ts[0].Send(cold, seqMsg(2*rounds+k, 32)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "small messages delivered", func() bool { return sinks[cold].count(0) >= 2*rounds+2*rcHotMsgs })
	sinks[cold].verify(t, 0, 2*rounds+2*rcHotMsgs)
	if e := ts[0].VerbsStats().RCMsgEvicted; e != evicted {
		t.Errorf("small messages to rank %d evicted %d links", cold, e-evicted)
	}

	// Nor does it make the answerer evict: the cold peer's pool has room
	// and asks rank 0 (MSGREQROOM, once the retry gate of its evicted link
	// has passed), whose pool is full: refused.
	time.Sleep(rcRetryAfter)
	for k := range 2 * rcHotMsgs {
		if err := ts[cold].Send(0, seqMsg(k, 32)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "small messages delivered", func() bool { return sinks[0].count(cold) >= 2*rcHotMsgs })
	sinks[0].verify(t, cold, 2*rcHotMsgs)
	time.Sleep(200 * time.Millisecond) // the request and its refusal
	if e := ts[0].VerbsStats().RCMsgEvicted; e != evicted {
		t.Errorf("rank %d's small messages made rank 0 evict %d links", cold, e-evicted)
	}
}

// A link whose handshake never finished (a MSGACK or MSGUP lost when the
// reliable layer gave up) gives its place back after rcSetupTimeout: the
// next large message asks again and the link comes up.
func TestStaleMessageLinkIsReplaced(t *testing.T) {
	ts, sinks := seqCluster(t, 2, 505)
	ts[0].do(func(st *state) {
		if err := st.initMsgLinks(); err != nil {
			t.Error(err)
			return
		}
		l := st.newLink(1, false, 0) // never asked: as if the answer was lost
		l.since = now() - int64(rcSetupTimeout) - 1
	})
	i := 0
	for ; i < 4 || ts[0].VerbsStats().RCMsgLinks == 0; i++ {
		if i > 200 {
			t.Fatal("no message link after 200 large messages: the stale link kept its place")
		}
		if err := ts[0].Send(1, seqMsg(i, 8<<10)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitFor(t, 30*time.Second, "every message delivered", func() bool { return sinks[1].count(0) >= i })
	sinks[1].verify(t, 0, i)
}

// A message queued on an up link while another link holds every send
// buffer goes out once buffers come back, with no further Send.
func TestLinkWaitingForBuffersIsPumped(t *testing.T) {
	ts, sinks := seqCluster(t, 3, 506)
	for p := 1; p <= 2; p++ { // a link to each peer
		for k := 0; rcSent(ts[0], ranks.Rank(p)) == 0; k++ {
			if k > 200 {
				t.Fatalf("no message link to rank %d after 200 messages", p)
			}
			if err := ts[0].Send(ranks.Rank(p), seqMsg(k, 8<<10)); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, "delivery", func() bool { return sinks[p].count(0) >= k+1 })
		}
	}
	n1, n2 := sinks[1].count(0), sinks[2].count(0)
	ts[0].do(func(st *state) {
		// 1 MiB to rank 1 takes every send buffer, then 4 KiB to rank 2
		// waits for one.
		if err := st.sendMsg(1, seqMsg(n1, 1<<20), true, now()); err != nil {
			t.Error(err)
		}
		if err := st.sendMsg(2, seqMsg(n2, 4<<10), true, now()); err != nil {
			t.Error(err)
		}
		if len(st.ml.free) != 0 {
			t.Errorf("%d send buffers free after 1 MiB: the test needs none", len(st.ml.free))
		}
	})
	waitFor(t, 30*time.Second, "the 4 KiB message to rank 2", func() bool { return sinks[2].count(0) >= n2+1 })
	waitFor(t, 30*time.Second, "the 1 MiB message to rank 1", func() bool { return sinks[1].count(0) >= n1+1 })
	sinks[2].verify(t, 0, n2+1)
	sinks[1].verify(t, 0, n1+1)
}

// A peer that gets rcHotMsgs small messages within rcHotWindow gets a
// message link, and the small messages after it take the link, in order.
func TestFrequentPartnerGetsMessageLink(t *testing.T) {
	ts, sinks := seqCluster(t, 2, 504)
	i := 0
	for ; i < 2*rcHotMsgs; i++ {
		if err := ts[0].Send(1, seqMsg(i, 32)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "a message link", func() bool { return ts[0].VerbsStats().RCMsgLinks > 0 })
	for end := i + 2*rcHotMsgs; i < end; i++ {
		if err := ts[0].Send(1, seqMsg(i, 32)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "every message delivered", func() bool { return sinks[1].count(0) >= i })
	time.Sleep(50 * time.Millisecond)
	sinks[1].verify(t, 0, i)
	if rcSent(ts[0], 1) == 0 {
		t.Error("no small message took the message link")
	}
	if vs := ts[0].VerbsStats(); vs.RCMsgErrors != 0 {
		t.Errorf("%+v: message link errors", vs)
	}
}

// A message link moved to the error state while messages are on it falls
// back to UD: nothing is lost or delivered twice, order holds, the error
// is counted.
func TestRCMessageLinkErrorFallsBack(t *testing.T) {
	ts, sinks := seqCluster(t, 2, 503)
	i := 0
	send := func(size int) {
		t.Helper()
		if err := ts[0].Send(1, seqMsg(i, size)); err != nil {
			t.Fatal(err)
		}
		i++
	}
	for rcSent(ts[0], 1) == 0 { // until messages take the link
		if i > 200 {
			t.Fatal("no message link after 200 messages")
		}
		send(64 << 10)
		time.Sleep(10 * time.Millisecond)
	}
	// On the engine: queue a burst on the link, then break its QP.
	burst := 0
	ts[0].do(func(st *state) {
		for k := range 12 {
			size := []int{64 << 10, 100, 16<<10 + 5}[k%3]
			if err := st.sendMsg(1, seqMsg(i, size), true, now()); err != nil {
				t.Error(err)
			}
			i++
			burst++
		}
		if l := st.ml.links[1]; l == nil || !l.up {
			t.Error("the link went down before the burst")
		} else if err := l.qp.SetError(); err != nil {
			t.Error(err)
		}
	})
	for range 10 { // and more after it, over UD now
		send(20 << 10)
	}
	waitFor(t, 60*time.Second, "every message delivered", func() bool { return sinks[1].count(0) >= i })
	time.Sleep(100 * time.Millisecond)
	sinks[1].verify(t, 0, i)
	vs := ts[0].VerbsStats()
	t.Logf("burst of %d; %+v", burst, vs)
	if vs.RCMsgErrors == 0 {
		t.Error("the broken link was not counted in RCMsgErrors")
	}
	if ts[0].Stats().MsgsDropped != 0 {
		t.Errorf("%d messages dropped", ts[0].Stats().MsgsDropped)
	}
}

// msgLinksPending waits until tr holds n message links being set up (the
// link worker has their QPs) and none up.
func msgLinksPending(t *testing.T, tr *Transport, n int) {
	t.Helper()
	waitFor(t, 10*time.Second, fmt.Sprintf("%d message links being set up", n), func() bool {
		var up, pending []ranks.Rank
		tr.do(func(st *state) { up, pending = st.msgLinkPeers() })
		return len(up) == 0 && len(pending) == n
	})
}

// A peer that restarts while the link worker makes this rank's end of its
// message link: the end is dropped with the old incarnation and its QP
// destroyed when the worker is done with it, and the new incarnation gets
// a link of its own that carries messages both ways.
func TestMessageLinkSetupPeerRestarts(t *testing.T) {
	const setupStall = 500 * time.Millisecond
	ts := openAll(t, 2, 505)
	o, b := ts[0], ts[1]
	o.lk.slowSetup = setupStall
	recs := startAll(t, ts)
	if err := b.Send(0, seqMsg(0, 8<<10)); err != nil { // asks for a link
		t.Fatal(err)
	}
	msgLinksPending(t, o, 1) // o's end: on the worker for setupStall
	b2, rec2 := restart(t, b, addrsOf(ts))
	if err := setPeers(o, []string{"", b2.Addr()}); err != nil {
		t.Fatal(err)
	}
	var up, pending []ranks.Rank
	o.do(func(st *state) { up, pending = st.msgLinkPeers() })
	if len(up)+len(pending) != 0 {
		t.Fatalf("rank 0 still holds message links up %v, being set up %v, after rank 1 restarted", up, pending)
	}
	time.Sleep(setupStall) // the worker's end comes back for nobody
	for i := range 3 {
		if err := b2.Send(0, seqMsg(i, 8<<10)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "a message link to the new incarnation", func() bool {
		return o.VerbsStats().RCMsgLinks > 0 && b2.VerbsStats().RCMsgLinks > 0
	})
	for i := range 3 {
		if err := o.Send(1, seqMsg(i, 8<<10)); err != nil {
			t.Fatal(err)
		}
		if err := b2.Send(0, seqMsg(3+i, 8<<10)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "messages both ways", func() bool {
		return len(rec2.from(0)) == 3 && len(recs[0].get(1)) >= 6
	})
	if n := rcSent(o, 1); n == 0 {
		t.Error("no message of rank 0 took the link to the new incarnation")
	}
	if n := rcSent(b2, 0); n == 0 {
		t.Error("no message of the new incarnation took its link")
	}
	vs := o.VerbsStats()
	t.Logf("rank 0: %+v, resources %+v", vs, o.Resources())
	if vs.RCMsgLinks != 1 || vs.RCMsgErrors != 0 {
		t.Errorf("rank 0: %d message links up (want 1: the old incarnation's never), %d errors", vs.RCMsgLinks, vs.RCMsgErrors)
	}
	waitFor(t, 10*time.Second, "rank 0's QP for the old incarnation destroyed", func() bool { return o.Resources().QPs == 2 })
}

// Close while the link worker makes one end of a message link and has
// another queued: both QPs are freed (Close reports a leak as an error).
func TestMessageLinkSetupAtClose(t *testing.T) {
	const setupStall = 500 * time.Millisecond
	ts := openAll(t, 3, 506)
	o := ts[0]
	o.lk.slowSetup = setupStall
	startAll(t, ts)
	for _, tr := range ts[1:] {
		if err := tr.Send(0, seqMsg(0, 8<<10)); err != nil { // asks for a link
			t.Fatal(err)
		}
	}
	msgLinksPending(t, o, 2)
	t0 := time.Now()
	if err := o.Close(); err != nil {
		t.Fatalf("Close with message link set-ups on the worker: %v", err)
	}
	t.Logf("Close took %v with a set-up of %v on the worker and one queued", time.Since(t0), setupStall)
}
