package verbs

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/era"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
	ibv "github.com/vigil-hpc/vigil/verbs"
)

// Replay protection on the verbs message path (#17 item 4) and rejoin of a
// restarted rank over verbs (#15 item 4). Real datagrams are captured as a
// transport posts them (Transport.capture) and posted again, byte for byte,
// from the sender's own UD QP, so that the receiver's source-QP check
// passes and only the replay protection stands in the way.

// capture records the datagrams one transport posts.
type capture struct {
	mu     sync.Mutex
	frames []captured
}

type captured struct {
	to ranks.Rank
	b  []byte
}

func (c *capture) hook(to ranks.Rank, f []byte) {
	c.mu.Lock()
	c.frames = append(c.frames, captured{to, bytes.Clone(f)})
	c.mu.Unlock()
}

// replayable are the captured datagrams towards one rank worth replaying:
// the DATA packets carrying node messages (by kind; retransmissions
// included), the transport's own (control) DATA packets, and the heartbeat
// datagrams. ACKs are left out:
// a replayed ack acknowledges nothing new and changes nothing.
type replayable struct {
	data  map[string][][]byte
	hb    [][]byte
	hbSeq []uint64
}

func (r replayable) all() [][]byte {
	var all [][]byte
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range r.data {
			if !yield(k) {
				return
			}
		}
	}) {
		all = append(all, r.data[k]...)
	}
	return all
}

func (r replayable) nData() int {
	n := 0
	for _, l := range r.data {
		n += len(l)
	}
	return n
}

func (c *capture) sort(t *testing.T, to ranks.Rank, job uint64) replayable {
	t.Helper()
	codec := wire.NewCodec(wire.Params{JobID: job, Key: testKey, N: 2, MaxPayload: 1 << 16, MAC: wire.MACSipHash})
	r := replayable{data: map[string][][]byte{}}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, fr := range c.frames {
		if fr.to != to {
			continue
		}
		f, n, err := codec.Decode(fr.b)
		if err != nil || n != len(fr.b) {
			t.Fatalf("captured datagram does not decode: %v (%d of %d bytes)", err, n, len(fr.b))
		}
		if seq, ok := heartbeatSeq(f); ok {
			r.hb, r.hbSeq = append(r.hb, fr.b), append(r.hbSeq, seq)
			continue
		}
		h, frag, ok := packetOf(f)
		if !ok {
			t.Fatalf("captured datagram is neither a heartbeat nor a packet: %x", fr.b)
		}
		if h.kind != kindData {
			continue
		}
		kind := "control"
		if h.flags&flagControl == 0 {
			if h.flags&flagLast == 0 {
				t.Fatalf("a node message of the test spans datagrams")
			}
			kind = "other"
			if mt, err := wire.PeekType(frag); err == nil {
				kind = msgKind(mt)
			}
		}
		r.data[kind] = append(r.data[kind], fr.b)
	}
	return r
}

func msgKind(mt wire.MsgType) string {
	switch mt {
	case wire.TypeNewObserver:
		return "newobserver"
	case wire.TypeBcast:
		return "bcast"
	case wire.TypeEvicted:
		return "evicted"
	case wire.TypeAgree:
		return "agree"
	}
	return fmt.Sprintf("type%d", mt)
}

// nodeMessage is a real encoded node message of one kind.
type nodeMessage struct {
	kind string
	b    []byte
}

// nodeMessages returns one message of each kind that matters for replay
// (rank 0 to rank 1 of a 2-rank job).
func nodeMessages(t *testing.T) []nodeMessage {
	t.Helper()
	ms := []nodeMessage{
		{"newobserver", wire.AppendMessage(nil, &wire.NewObserver{Observer: 1})},
		{"bcast", wire.AppendMessage(nil, &wire.Bcast{Message: bcast.Message{ID: bcast.ID{Source: 0, Seq: 1},
			Kind: bcast.Failed, Dead: []ranks.Rank{1}, DetectedAt: time.Now().UnixNano()}})},
		{"evicted", wire.AppendMessage(nil, &wire.Evicted{Rank: 1, Live: 1})},
		{"agree", wire.AppendMessage(nil, &wire.Agree{Op: 1, Msg: era.Msg{Kind: era.Up, ID: era.ID{Epoch: 1, Seq: 7},
			Value: []byte("v"), Dead: ranks.Of(1), Acked: ranks.Of(1)}})},
	}
	for _, m := range ms {
		if _, err := wire.DecodeMessage(m.b, 2); err != nil {
			t.Fatalf("%s: %v", m.kind, err)
		}
	}
	return ms
}

func newReceived() *received {
	return &received{msgs: map[ranks.Rank][]string{}, ch: make(chan struct{}, 1)}
}

func (r *received) from(p ranks.Rank) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs[p])
}

// replayPair opens and starts ranks 0 and 1 of job, capturing what each
// posts.
func replayPair(t *testing.T, job uint64) ([]*Transport, []*received, []*capture) {
	t.Helper()
	ts := openAll(t, 2, job)
	recs := []*received{newReceived(), newReceived()}
	caps := []*capture{{}, {}}
	addrs := addrsOf(ts)
	for i, tr := range ts {
		tr.locked.capture = caps[i].hook
		if err := tr.Start(addrs, recs[i].handler); err != nil {
			t.Fatal(err)
		}
	}
	return ts, recs, caps
}

// restart closes old and opens and starts its rank again with the next
// incarnation (a new UD QP); peers are the other ranks' addresses.
func restart(t *testing.T, old *Transport, peers []string) (*Transport, *received) {
	t.Helper()
	cfg := old.cfg
	cfg.Incarnation++
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	tr, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Errorf("restarted rank %d Close: %v", cfg.Self, err)
		}
	})
	rec := newReceived()
	addrs := slices.Clone(peers)
	addrs[cfg.Self] = tr.Addr()
	if err := tr.Start(addrs, rec.handler); err != nil {
		t.Fatal(err)
	}
	return tr, rec
}

// postRaw posts frame, as it is, from tr's UD QP to rank to.
func postRaw(t *testing.T, tr *Transport, to ranks.Rank, frame []byte) {
	t.Helper()
	var err error
	if !tr.do(func(st *state) {
		var d *ibv.UDDest
		if d, err = st.dest(to); err != nil {
			return
		}
		if len(frame) > st.inline {
			err = fmt.Errorf("frame of %d bytes above the inline limit %d", len(frame), st.inline)
			return
		}
		err = st.postInline(d, frame)
	}) {
		t.Fatal("transport not running")
	}
	if err != nil {
		t.Fatal(err)
	}
}

// quiesce waits until tr holds nothing unacknowledged towards to.
func quiesce(t *testing.T, tr *Transport, to ranks.Rank) {
	t.Helper()
	waitFor(t, 10*time.Second, "every packet acknowledged", func() bool {
		n := -1
		tr.do(func(st *state) { n = st.rel.pending(to) })
		return n == 0
	})
}

func rejected(tr *Transport, reason string) uint64 { return tr.Stats().Rejected[reason] }

// sendAll sends every node message from a to rank 1 and three heartbeats
// (datagrams: the RC link is not up yet), and waits for their delivery.
// capturedSession opens a capturing pair for job, sends every node
// message from rank 0 to rank 1 and returns both ranks, their handlers'
// records, the messages and what rank 0 posted to rank 1, with at least
// one datagram of each kind and one heartbeat.
func capturedSession(t *testing.T, job uint64) (a, b *Transport, recs []*received, ms []nodeMessage, r replayable) {
	t.Helper()
	ts, recs, caps := replayPair(t, job)
	a, b = ts[0], ts[1]
	ms = nodeMessages(t)
	sendAll(t, a, b, recs[1], ms)
	r = caps[0].sort(t, 1, job)
	for _, m := range ms {
		if len(r.data[m.kind]) == 0 {
			t.Fatalf("no %s datagram captured", m.kind)
		}
	}
	if len(r.hb) == 0 {
		t.Fatal("no heartbeat datagram captured")
	}
	return a, b, recs, ms, r
}

func sendAll(t *testing.T, a *Transport, b *Transport, rec *received, ms []nodeMessage) {
	t.Helper()
	for _, m := range ms {
		if err := a.Send(1, m.b); err != nil {
			t.Fatal(err)
		}
	}
	for seq := uint64(1); seq <= 3; seq++ {
		if err := a.SendHeartbeat(1, seq); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "every message delivered", func() bool { return len(rec.from(0)) == len(ms) })
	waitFor(t, 10*time.Second, "the heartbeats stored", func() bool { return b.Slots().Load(0) == 3 })
	quiesce(t, a, 1)
	quiesce(t, b, 0)
}

// exactlyOnce checks that got holds each message of ms once, in order.
func exactlyOnce(t *testing.T, got []string, ms []nodeMessage) {
	t.Helper()
	want := make([]string, len(ms))
	for i, m := range ms {
		want[i] = string(m.b)
	}
	if !slices.Equal(got, want) {
		t.Errorf("handler saw %d messages %q, want each of the %d once", len(got), got, len(ms))
	}
}

// Within one incarnation: every captured DATA packet (NEWOBSERVER, a
// broadcast, EVICTED, an agreement message, the transport's own link
// request) and every heartbeat datagram, posted again from the sender's
// QP, is rejected and counted: "duplicate" for the packets, whose
// sequence numbers were delivered, "old_heartbeat" for the heartbeats;
// the handler saw each message once and the slot did not move.
func TestReplayWithinIncarnation(t *testing.T) {
	a, b, recs, ms, r := capturedSession(t, 61)
	slot := b.Slots().Load(0)
	dup0, old0 := rejected(b, "duplicate"), rejected(b, "old_heartbeat")
	for _, f := range append(r.all(), r.hb...) {
		postRaw(t, a, 1, f)
	}
	waitFor(t, 5*time.Second, fmt.Sprintf("%d replayed packets counted as duplicate and %d heartbeats as old_heartbeat", r.nData(), len(r.hb)), func() bool {
		return rejected(b, "duplicate")-dup0 >= uint64(r.nData()) && rejected(b, "old_heartbeat")-old0 >= uint64(len(r.hb))
	})
	time.Sleep(100 * time.Millisecond)
	exactlyOnce(t, recs[1].from(0), ms)
	if got := b.Slots().Load(0); got != slot {
		t.Errorf("slot word moved from %d to %d", slot, got)
	}
	t.Logf("replayed %d packets (%v) and %d heartbeats %v; receiver rejected %v", r.nData(), slices.Sorted(func(y func(string) bool) {
		for k := range r.data {
			if !y(k) {
				return
			}
		}
	}), len(r.hb), r.hbSeq, b.Stats().Rejected)
}

// Across incarnations of the receiver: the captured datagrams of a session
// with rank 1, replayed from the sender's QP to rank 1 restarted (whose
// sequence numbers start afresh), are rejected as bound to its previous
// incarnation ("wrong_incarnation"): the new incarnation's handler sees
// none of them and its slot stays at zero; a new message then arrives once.
func TestReplayToRestartedReceiver(t *testing.T) {
	a, b, _, _, r := capturedSession(t, 62)
	b2, rec2 := restart(t, b, []string{a.Addr(), ""})
	if err := setPeers(a, []string{"", b2.Addr()}); err != nil {
		t.Fatalf("SetPeers with rank 1's new address: %v", err)
	}
	a.do(func(st *state) {})
	for _, f := range append(r.all(), r.hb...) {
		postRaw(t, a, 1, f)
	}
	n := uint64(r.nData() + len(r.hb))
	waitFor(t, 5*time.Second, fmt.Sprintf("%d replayed datagrams counted as wrong_incarnation", n), func() bool {
		return rejected(b2, "wrong_incarnation") >= n
	})
	time.Sleep(100 * time.Millisecond)
	if got := rec2.from(0); len(got) != 0 {
		t.Errorf("the restarted receiver's handler saw %d replayed messages", len(got))
	}
	if got := b2.Slots().Load(0); got != 0 {
		t.Errorf("the restarted receiver's slot word for rank 0 is %d, want 0 (replayed heartbeats accepted)", got)
	}
	if err := a.Send(1, []byte("after the restart")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a new message delivered", func() bool { return len(rec2.from(0)) == 1 })
	time.Sleep(50 * time.Millisecond)
	if got := rec2.from(0); !slices.Equal(got, []string{"after the restart"}) {
		t.Errorf("the restarted receiver got %q", got)
	}
	t.Logf("restarted receiver rejected %v", b2.Stats().Rejected)
}

// A restarted rank rejoins: rank 1 (heartbeating rank 0 over RDMA, rank 0
// heartbeating it) is closed and opened again with the next incarnation
// and a new QP number; rank 0 gets its new address. Rank 0's slot word for
// rank 1 is reset, so the new incarnation's heartbeats count from 1 (the
// slot's compare-and-swap swallowed them before); both heartbeat links are
// rebuilt (the old ones dropped), messages go both ways with fresh
// sequence numbers, and the old incarnation's datagrams, posted again from
// the new incarnation's QP, are rejected as stale.
func TestRestartedRankRejoins(t *testing.T) {
	const job = 63
	ts, recs, caps := replayPair(t, job)
	a, b := ts[0], ts[1]
	if err := a.Send(1, []byte("a0")); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(0, []byte("b0")); err != nil {
		t.Fatal(err)
	}
	sb := linkUp(t, b, 0)
	for range 50 {
		sb++
		b.SendHeartbeat(0, sb)
	}
	waitFor(t, 5*time.Second, "rank 0's slot for rank 1 at the last heartbeat", func() bool { return a.Slots().Load(1) == sb })
	sa := linkUp(t, a, 1)
	waitFor(t, 5*time.Second, "rank 1's slot for rank 0 at the last heartbeat", func() bool { return b.Slots().Load(0) == sa })
	waitFor(t, 10*time.Second, "messages delivered", func() bool { return len(recs[0].from(1)) == 1 && len(recs[1].from(0)) == 1 })
	quiesce(t, a, 1)
	quiesce(t, b, 0)
	old := caps[1].sort(t, 0, job)
	if len(old.hb) == 0 || old.nData() == 0 {
		t.Fatalf("captured %d heartbeats and %d packets of rank 1", len(old.hb), old.nData())
	}

	b2, rec2 := restart(t, b, []string{a.Addr(), ""})
	if err := setPeers(a, []string{"", b2.Addr()}); err != nil {
		t.Fatalf("SetPeers with rank 1's new address: %v", err)
	}
	a.do(func(st *state) {})
	// The new incarnation's heartbeats count from 1.
	seq := uint64(0)
	for seq < 3 {
		seq++
		if err := b2.SendHeartbeat(0, seq); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, fmt.Sprintf("rank 0's slot for rank 1 at the new incarnation's heartbeat %d (it was %d)", seq, sb), func() bool {
			return a.Slots().Load(1) == seq
		})
	}
	waitFor(t, 10*time.Second, "the new incarnation's RDMA link up", func() bool {
		seq++
		b2.SendHeartbeat(0, seq)
		return b2.VerbsStats().RCWrites > 0
	})
	for range 10 {
		seq++
		b2.SendHeartbeat(0, seq)
	}
	waitFor(t, 5*time.Second, "rank 0's slot at the new incarnation's last RDMA heartbeat", func() bool { return a.Slots().Load(1) == seq })
	// Rank 0's link to the old incarnation is gone: a new one to the new.
	links := a.VerbsStats().LinksUp
	waitFor(t, 10*time.Second, "rank 0's new link to rank 1", func() bool {
		sa++
		a.SendHeartbeat(1, sa)
		return a.VerbsStats().LinksUp > links && b2.Slots().Load(0) == sa
	})
	// Messages both ways, with fresh sequence numbers.
	if err := a.Send(1, []byte("a1")); err != nil {
		t.Fatal(err)
	}
	if err := b2.Send(0, []byte("b1")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "messages to and from the new incarnation", func() bool {
		return len(rec2.from(0)) == 1 && len(recs[0].from(1)) == 2
	})
	quiesce(t, a, 1)
	quiesce(t, b2, 0)
	// The old incarnation's datagrams are stale.
	stale0, slot := rejected(a, "stale"), a.Slots().Load(1)
	for _, f := range append(old.all(), old.hb...) {
		postRaw(t, b2, 0, f)
	}
	n := uint64(old.nData() + len(old.hb))
	waitFor(t, 5*time.Second, fmt.Sprintf("%d datagrams of the old incarnation counted as stale", n), func() bool {
		return rejected(a, "stale")-stale0 >= n
	})
	time.Sleep(100 * time.Millisecond)
	if got := recs[0].from(1); !slices.Equal(got, []string{"b0", "b1"}) {
		t.Errorf("rank 0 got %q from rank 1, want [b0 b1]", got)
	}
	if got := rec2.from(0); !slices.Equal(got, []string{"a1"}) {
		t.Errorf("the new incarnation got %q, want [a1]", got)
	}
	if got := a.Slots().Load(1); got != slot {
		t.Errorf("rank 0's slot for rank 1 moved from %d to %d on the old incarnation's heartbeats", slot, got)
	}
	// One active and one passive RC QP each: the old links are gone.
	for _, tr := range []*Transport{a, b2} {
		if got := tr.Resources().QPs; got != 3 {
			t.Errorf("rank %d holds %d QPs, want 3 (UD, one active and one passive RC)", tr.cfg.Self, got)
		}
	}
	t.Logf("rank 0: %+v %+v", a.Stats().Rejected, a.VerbsStats())
}

// SetPeers refuses malformed tables and ignores an address of an older
// incarnation than the one known.
func TestSetPeersErrors(t *testing.T) {
	ts := openAll(t, 2, 64)
	if err := ts[0].SetPeers(addrsOf(ts)); err == nil {
		t.Error("SetPeers before Start accepted")
	}
	for _, tr := range ts {
		if err := tr.Start(addrsOf(ts), func(ranks.Rank, []byte) {}); err != nil {
			t.Fatal(err)
		}
	}
	a := ts[0]
	older, err := ParseAddress(ts[1].Addr())
	if err != nil {
		t.Fatal(err)
	}
	older.Inc--
	older.QPN++
	for _, c := range []struct {
		addrs []string
		want  string
	}{
		{[]string{""}, "1 addresses for 2 ranks"},
		{[]string{"", "127.0.0.1:80"}, "rank 1"},
		{[]string{ts[1].Addr(), ""}, "published"},
	} {
		if err := a.SetPeers(c.addrs); err == nil || !bytes.Contains([]byte(err.Error()), []byte(c.want)) {
			t.Errorf("SetPeers(%v) = %v, want an error containing %q", c.addrs, err, c.want)
		}
	}
	if err := a.SetPeers([]string{"", older.String()}); err != nil {
		t.Fatal(err)
	}
	var got Address
	a.do(func(st *state) { got = st.peers[1] })
	if got.String() != ts[1].Addr() {
		t.Errorf("an older incarnation's address replaced the known one: %s", got)
	}
	if a.VerbsStats().Restarts != 0 {
		t.Error("an older incarnation's address counted as a restart")
	}
}
