package verbs

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/ranks"
	ibv "github.com/vigil-hpc/vigil/verbs"
)

// lossyNet connects reliable layers in memory with loss, duplication and
// reordering, driven by a simulated clock.
type lossyNet struct {
	rng                 *rand.Rand
	nodes               []*reliable
	inflight            []datagram
	loss, dup, reorder  float64
	delivered           [][]string // per receiver, "from:msg" in order
	cut                 map[ranks.Rank]bool
	gaveUp              map[ranks.Rank]int
	sentDatagrams, lost int
	now                 int64 // the simulated clock, for the layers
}

type datagram struct {
	from, to ranks.Rank
	b        []byte
}

func newLossyNet(n int, seed int64, frag int) *lossyNet {
	ln := &lossyNet{rng: rand.New(rand.NewSource(seed)), delivered: make([][]string, n),
		cut: map[ranks.Rank]bool{}, gaveUp: map[ranks.Rank]int{}}
	for i := 0; i < n; i++ {
		me := ranks.Rank(i)
		cfg := defaultRelConfig(frag)
		cfg.window = 4
		r := newReliable(cfg)
		r.xmit = func(to ranks.Rank, p []byte) {
			ln.sentDatagrams++
			ln.inflight = append(ln.inflight, datagram{me, to, append([]byte(nil), p...)})
		}
		r.deliver = func(from ranks.Rank, ctl bool, m []byte) {
			ln.delivered[me] = append(ln.delivered[me], fmt.Sprintf("%d:%v:%s", from, ctl, m))
		}
		r.gaveUp = func(to ranks.Rank, msgs int) { ln.gaveUp[to] += msgs }
		ln.nodes = append(ln.nodes, r)
	}
	return ln
}

// step delivers (or loses, duplicates, reorders) what is in flight.
func (ln *lossyNet) step() {
	batch := ln.inflight
	ln.inflight = nil
	if ln.rng.Float64() < ln.reorder {
		ln.rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
	}
	for _, d := range batch {
		if ln.cut[d.to] || ln.cut[d.from] || ln.rng.Float64() < ln.loss {
			ln.lost++
			continue
		}
		copies := 1
		if ln.rng.Float64() < ln.dup {
			copies = 2
		}
		for c := 0; c < copies; c++ {
			h, frag, err := decodePacket(d.b)
			if err != nil {
				panic(err)
			}
			if h.kind == kindAck {
				ln.nodes[d.to].onAck(d.from, h.seq, ln.now)
			} else {
				ln.nodes[d.to].onData(d.from, h, frag, ln.now)
			}
		}
	}
	for _, r := range ln.nodes { // as the transport does after each batch
		r.flushAcks(0, 0)
	}
}

func (ln *lossyNet) run(t *testing.T, clock *int64, steps int) {
	t.Helper()
	for i := 0; i < steps; i++ {
		ln.now = *clock
		ln.step()
		*clock += 5e6 // 5 ms per round
		for _, r := range ln.nodes {
			r.tick(*clock)
		}
	}
}

func TestReliableLossDupReorder(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		ln := newLossyNet(3, seed, 7)
		ln.loss, ln.dup, ln.reorder = 0.25, 0.2, 0.5
		var clock int64
		want := make([][]string, 3)
		for k := 0; k < 40; k++ {
			from := ranks.Rank(k % 3)
			to := ranks.Rank((k + 1 + k/3%2) % 3)
			msg := bytes.Repeat([]byte{byte('a' + k%26)}, k%20) // 0..19 bytes: 1..3 fragments
			if err := ln.nodes[from].send(to, k%5 == 0, msg, clock); err != nil {
				t.Fatal(err)
			}
			want[to] = append(want[to], fmt.Sprintf("%d:%v:%s", from, k%5 == 0, msg))
			ln.run(t, &clock, 1)
		}
		ln.run(t, &clock, 1000)
		if len(ln.gaveUp) != 0 {
			t.Fatalf("seed %d: gave up on %v", seed, ln.gaveUp)
		}
		for r := range want {
			// Per-sender order is what the layer guarantees: compare per sender.
			for from := 0; from < 3; from++ {
				w, g := perSender(want[r], from), perSender(ln.delivered[r], from)
				if fmt.Sprint(w) != fmt.Sprint(g) {
					t.Fatalf("seed %d: rank %d from %d got %q, want %q", seed, r, from, g, w)
				}
			}
		}
		for r, n := range ln.nodes {
			for p := range n.peers {
				if n.pending(p) != 0 {
					t.Fatalf("seed %d: rank %d still holds %d packets to %d", seed, r, n.pending(p), p)
				}
			}
		}
		if ln.lost == 0 {
			t.Fatalf("seed %d: the network lost nothing: the test tests nothing", seed)
		}
	}
}

func perSender(l []string, from int) []string {
	var out []string
	p := fmt.Sprintf("%d:", from)
	for _, s := range l {
		if len(s) >= len(p) && s[:len(p)] == p {
			out = append(out, s)
		}
	}
	return out
}

// A dead peer is given up after maxTries, its messages counted; when it
// comes back the base in the next packets makes it skip the abandoned ones.
func TestReliableGiveUpAndSkip(t *testing.T) {
	ln := newLossyNet(2, 7, 100)
	var clock int64
	ln.cut[1] = true
	for i := 0; i < 6; i++ {
		if err := ln.nodes[0].send(1, false, []byte(fmt.Sprint("lost", i)), clock); err != nil {
			t.Fatal(err)
		}
	}
	ln.run(t, &clock, 2000) // 10 s simulated
	if ln.gaveUp[1] != 6 {
		t.Fatalf("gave up %d messages, want 6", ln.gaveUp[1])
	}
	if ln.nodes[0].pending(1) != 0 {
		t.Fatalf("%d packets still held", ln.nodes[0].pending(1))
	}
	ln.cut[1] = false
	if err := ln.nodes[0].send(1, false, []byte("after"), clock); err != nil {
		t.Fatal(err)
	}
	ln.run(t, &clock, 50)
	if got := fmt.Sprint(ln.delivered[1]); got != "[0:false:after]" {
		t.Fatalf("after reconnect rank 1 got %s, want [0:false:after]", got)
	}
}

func TestReliableLimits(t *testing.T) {
	ln := newLossyNet(2, 1, 10)
	ln.nodes[0].cfg.queueMax = 3
	if err := ln.nodes[0].send(1, false, make([]byte, 1<<20+1), 0); err == nil {
		t.Fatal("oversized message accepted")
	}
	for i := 0; ; i++ {
		err := ln.nodes[0].send(1, false, make([]byte, 10), 0)
		if err != nil {
			if i < 3 {
				t.Fatalf("queue full after %d messages: %v", i, err)
			}
			break
		}
		if i > 100 {
			t.Fatal("queue never full")
		}
	}
	// Bogus acks beyond what was sent do not crash or ack the unsent.
	ln.nodes[0].onAck(1, 1<<60, 0)
	ln.nodes[0].onAck(5, 3, 0)
}

func TestPacketCodec(t *testing.T) {
	b := appendData(nil, flagLast|flagControl, 9, 4, 2, []byte("xyz"))
	h, f, err := decodePacket(b)
	if err != nil || h.kind != kindData || h.seq != 9 || h.base != 4 || h.ack != 2 || string(f) != "xyz" || h.flags != flagLast|flagControl {
		t.Fatalf("round trip: %+v %q %v", h, f, err)
	}
	h, _, err = decodePacket(appendAck(nil, 77))
	if err != nil || h.kind != kindAck || h.seq != 77 {
		t.Fatalf("ack round trip: %+v %v", h, err)
	}
	h, _, err = decodePacket(appendHeartbeatPkt(nil, 1<<40))
	if err != nil || h.kind != kindHeartbeat || h.seq != 1<<40 {
		t.Fatalf("heartbeat round trip: %+v %v", h, err)
	}
	for _, bad := range [][]byte{nil, {1}, {3, 0}, {4, 0}, appendData(nil, 0, 0, 0, 0, nil), appendData(nil, 0, 3, 4, 0, nil),
		appendData(nil, 0x80, 3, 1, 0, nil), append(appendAck(nil, 1), 0), append(appendHeartbeatPkt(nil, 1), 0),
		appendHeartbeatPkt(nil, 0)} {
		if _, _, err := decodePacket(bad); err == nil {
			t.Errorf("decodePacket(%x) accepted", bad)
		}
	}
	d := appendDatagramHeader(nil, 0xfeed)
	d = appendAck(d, 3)
	to, h, _, err := decodeDatagram(d)
	if err != nil || to != 0xfeed || h.kind != kindAck || h.seq != 3 {
		t.Fatalf("datagram round trip: %#x %+v %v", to, h, err)
	}
	for _, bad := range [][]byte{nil, make([]byte, 7), appendDatagramHeader(nil, 1)} {
		if _, _, _, err := decodeDatagram(bad); err == nil {
			t.Errorf("decodeDatagram(%x) accepted", bad)
		}
	}
	ep := ibv.Endpoint{QPN: 17, PSN: 0x123456, LID: 3, GID: ibv.GID{15: 1}}
	for _, c := range []control{{op: ctlConnReq, ep: ep}, {op: ctlConnAck, ep: ep, echo: 99},
		{op: ctlMsgReq, ep: ep}, {op: ctlMsgReqRoom, ep: ep}, {op: ctlMsgAck, ep: ep, echo: 98}, {op: ctlMsgUp, ep: ep, echo: 96}, {op: ctlMsgClose, echo: 97},
		{op: ctlMsgResend, seq: 5, data: []byte("message")}, {op: ctlMsgResend, seq: 6, data: []byte{}}} {
		got, err := decodeControl(append(c.append(nil), c.data...))
		if err != nil || got.op != c.op || got.ep != c.ep || got.echo != c.echo || got.rkey != c.rkey || got.seq != c.seq ||
			!bytes.Equal(got.data, c.data) {
			t.Fatalf("control round trip: %+v -> %+v %v", c, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {9}, {ctlConnReq, 1}, control{op: ctlConnReq}.append(nil),
		{ctlMsgClose, 1, 2, 3}, {ctlMsgResend, 1, 0, 0}, control{op: ctlMsgResend}.append(nil)} {
		if _, err := decodeControl(bad); err == nil {
			t.Errorf("decodeControl(%x) accepted", bad)
		}
	}
}

func TestAddressRoundTrip(t *testing.T) {
	a := Address{GID: ibv.GID{10: 0xff, 11: 0xff, 12: 10, 13: 99, 15: 1}, QPN: 0x11, QKey: ibv.DefaultQKey,
		Slots: ibv.RemoteMR{Addr: 0x7f0000001000, Len: 64, RKey: 0xabc}, Inc: 0x1234_5678_9abc_def0}
	got, err := ParseAddress(a.String())
	if err != nil || got != a {
		t.Fatalf("%s -> %+v %v", a, got, err)
	}
	for _, bad := range []string{"127.0.0.1:5", "verbs2:", "verbs2:zz:0:1:1:1000:64:1:1", a.String() + ":1",
		"verbs2:00000000000000000000000000000000:0:1:1:1000:64:1:1", // no GID, no LID
		"verbs2:0000000000000000000000000000000a:0:1:1:1003:64:1:1", // unaligned
		"verbs2:0000000000000000000000000000000a:0:99999999:1:1000:64:1:1",
		"verbs2:0000000000000000000000000000000a:0:1:1:1000:64:1:0", // incarnation 0
		"verbs1:0000000000000000000000000000000a:0:1:1:1000:64:1"} { // an older build's
		if _, err := ParseAddress(bad); err == nil {
			t.Errorf("ParseAddress(%q) accepted", bad)
		}
	}
}

func FuzzDecodePacket(f *testing.F) {
	f.Add(appendData(nil, flagLast, 1, 1, 0, []byte("m")))
	f.Add(appendAck(nil, 5))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, frag, err := decodePacket(b)
		if err != nil {
			return
		}
		if re := reencode(h, frag); !bytes.Equal(re, b) {
			t.Fatalf("re-encoding %x gave %x", b, re)
		}
	})
}

func reencode(h pktHeader, frag []byte) []byte {
	switch h.kind {
	case kindData:
		return appendData(nil, h.flags, h.seq, h.base, h.ack, frag)
	case kindAck:
		return appendAck(nil, h.seq)
	}
	return appendHeartbeatPkt(nil, h.seq)
}

func FuzzDecodeDatagram(f *testing.F) {
	f.Add(appendData(appendDatagramHeader(nil, 7), flagLast, 1, 1, 0, []byte("m")))
	f.Add(appendAck(appendDatagramHeader(nil, 7), 5))
	f.Add(appendHeartbeatPkt(appendDatagramHeader(nil, 1<<63), 9))
	f.Fuzz(func(t *testing.T, b []byte) {
		to, h, frag, err := decodeDatagram(b)
		if err != nil {
			return
		}
		if re := reencode(h, frag); !bytes.Equal(append(appendDatagramHeader(nil, to), re...), b) {
			t.Fatalf("re-encoding %x gave %x", b, re)
		}
	})
}

func FuzzDecodeControl(f *testing.F) {
	f.Add(control{op: ctlConnAck, ep: ibv.Endpoint{QPN: 5}, echo: 3}.append(nil))
	f.Add(control{op: ctlMsgClose, echo: 3}.append(nil))
	f.Add(append(control{op: ctlMsgResend, seq: 3}.append(nil), "abc"...))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeControl(b)
		if err == nil && !bytes.Equal(append(c.append(nil), c.data...), b) {
			t.Fatalf("re-encoding %x differs", b)
		}
	})
}

func FuzzDecodeChunk(f *testing.F) {
	f.Add([]byte{rcFirst | rcLast, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 'x'})
	f.Add([]byte{rcLast, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		flags, seq, size, chunk, err := decodeChunk(b)
		if err != nil {
			return
		}
		if seq == 0 || flags&^(rcFirst|rcLast) != 0 || len(chunk) != len(b)-rcHdr || len(chunk) > size {
			t.Fatalf("decodeChunk(%x) = %#x %d %d %d bytes", b, flags, seq, size, len(chunk))
		}
	})
}

func FuzzParseAddress(f *testing.F) {
	f.Add(Address{GID: ibv.GID{1}, QPN: 3, Slots: ibv.RemoteMR{Addr: 8, Len: 8, RKey: 1}}.String())
	f.Add("verbs1:x")
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddress(s)
		if err != nil {
			return
		}
		b, err := ParseAddress(a.String())
		if err != nil || b != a {
			t.Fatalf("%q -> %+v -> %v %v", s, a, b, err)
		}
	})
}

// A reply carries the ack of its request (no ACK datagram); what no DATA
// carried goes out as a lone ACK when the driver flushes it, once it has
// been owed for ackDelay; a duplicate is acked at once.
func TestReliablePiggybackedAcks(t *testing.T) {
	ln := newLossyNet(2, 1, 100)
	take := func() []datagram { d := ln.inflight; ln.inflight = nil; return d }
	recv := func(d datagram) pktHeader {
		t.Helper()
		h, frag, err := decodePacket(d.b)
		if err != nil {
			t.Fatal(err)
		}
		if h.kind == kindAck {
			ln.nodes[d.to].onAck(d.from, h.seq, 0)
		} else {
			ln.nodes[d.to].onData(d.from, h, frag, 0)
		}
		return h
	}
	if err := ln.nodes[0].send(1, false, []byte("req"), 0); err != nil {
		t.Fatal(err)
	}
	req := take()
	if len(req) != 1 {
		t.Fatalf("request: %d datagrams, want 1", len(req))
	}
	recv(req[0])
	if d := take(); len(d) != 0 {
		t.Fatalf("in-order DATA acked at once (%d datagrams): the ack should wait for a reply or a flush", len(d))
	}
	if err := ln.nodes[1].send(0, false, []byte("rep"), 0); err != nil {
		t.Fatal(err)
	}
	rep := take()
	if len(rep) != 1 {
		t.Fatalf("reply: %d datagrams, want 1", len(rep))
	}
	ln.nodes[1].flushAcks(0, 0)
	if d := take(); len(d) != 0 {
		t.Fatalf("flush after the reply sent %d datagrams: the reply carried the ack", len(d))
	}
	if h := recv(rep[0]); h.ack != 1 {
		t.Fatalf("reply carries ack %d, want 1", h.ack)
	}
	if n := ln.nodes[0].pending(1); n != 0 {
		t.Fatalf("request still held (%d packets) after the reply's piggybacked ack", n)
	}
	ln.nodes[0].flushAcks(ackDelay-1, ackDelay) // owed since 0: not yet
	if d := take(); len(d) != 0 {
		t.Fatalf("flush before ackDelay sent %d datagrams: the ack should wait for a request to carry it", len(d))
	}
	ln.nodes[0].flushAcks(ackDelay, ackDelay)
	acks := take()
	if len(acks) != 1 {
		t.Fatalf("flush: %d datagrams, want one lone ACK for the reply", len(acks))
	}
	if h := recv(acks[0]); h.kind != kindAck || h.seq != 1 {
		t.Fatalf("flushed %+v, want ACK 1", h)
	}
	if n := ln.nodes[1].pending(0); n != 0 {
		t.Fatalf("reply still held (%d packets)", n)
	}
	recv(req[0]) // duplicate
	if d := take(); len(d) != 1 {
		t.Fatalf("duplicate: %d datagrams, want an immediate ACK", len(d))
	}
	if got := fmt.Sprint(ln.delivered); got != "[[1:false:rep] [0:false:req]]" {
		t.Fatalf("delivered %s", got)
	}
}

// A restarted peer: both ends reset their state towards each other (the
// new incarnation starts from nothing), what was unacknowledged towards it
// is dropped and counted, and sequence numbers start from 1 both ways;
// every DATA packet received again is reported as a duplicate.
func TestReliableResetAfterRestart(t *testing.T) {
	ln := newLossyNet(2, 1, 64)
	dups := 0
	ln.nodes[1].duplicate = func(ranks.Rank, uint64) { dups++ }
	var clock int64
	for k := range 3 {
		if err := ln.nodes[0].send(1, false, []byte{byte('a' + k)}, clock); err != nil {
			t.Fatal(err)
		}
	}
	ln.run(t, &clock, 5)
	ln.inflight = nil
	if ln.nodes[0].pending(1) != 0 || len(ln.delivered[1]) != 3 {
		t.Fatalf("before the restart: %d pending, delivered %q", ln.nodes[0].pending(1), ln.delivered[1])
	}
	// A packet received again (a replay) is a duplicate.
	ln.nodes[1].onData(0, pktHeader{kind: kindData, flags: flagLast, seq: 2, base: 1}, []byte("b"), clock)
	if dups != 1 || len(ln.delivered[1]) != 3 {
		t.Fatalf("replayed packet: %d duplicates, delivered %q", dups, ln.delivered[1])
	}
	ln.inflight = nil
	// Rank 1 restarts: a fresh layer; rank 0 resets its state towards it,
	// dropping a message it had not had acknowledged.
	ln.cut[1] = true
	ln.nodes[0].send(1, false, []byte("lost"), clock)
	ln.run(t, &clock, 1)
	delete(ln.cut, 1)
	if n := ln.nodes[0].reset(1); n != 1 {
		t.Fatalf("reset dropped %d messages, want 1", n)
	}
	fresh := newReliable(ln.nodes[1].cfg)
	fresh.xmit, fresh.deliver = ln.nodes[1].xmit, func(from ranks.Rank, ctl bool, m []byte) {
		ln.delivered[1] = append(ln.delivered[1], fmt.Sprintf("new %d:%s", from, m))
	}
	ln.nodes[1] = fresh
	ln.inflight = nil
	if err := ln.nodes[0].send(1, false, []byte("x"), clock); err != nil {
		t.Fatal(err)
	}
	if err := ln.nodes[1].send(0, false, []byte("y"), clock); err != nil {
		t.Fatal(err)
	}
	for _, d := range ln.inflight {
		if h, _, _ := decodePacket(d.b); h.kind != kindData || h.seq != 1 {
			t.Errorf("after the restart %d -> %d sends %+v, want DATA seq 1", d.from, d.to, h)
		}
	}
	ln.run(t, &clock, 5)
	if got := ln.delivered[1][len(ln.delivered[1])-1]; got != "new 0:x" {
		t.Errorf("the restarted peer got %q last", got)
	}
	if got := ln.delivered[0]; len(got) != 1 || got[0] != "1:false:y" {
		t.Errorf("rank 0 got %q from the restarted peer", got)
	}
}

// A slow path (acks late, nothing lost) costs one retransmission per
// timeout, not a window of them, and the timeout grows to the measured
// round trip so that the next messages are not resent at all.
func TestReliableLateAcksAdapt(t *testing.T) {
	const oneWay = 25e6 // a 50 ms round trip: 2.5 × rto0
	type timed struct {
		at int64
		d  datagram
	}
	var wire []timed
	var clock int64
	nodes := make([]*reliable, 2)
	delivered := 0
	for i := range nodes {
		me := ranks.Rank(i)
		cfg := defaultRelConfig(10)
		nodes[i] = newReliable(cfg)
		nodes[i].xmit = func(to ranks.Rank, p []byte) {
			wire = append(wire, timed{clock + oneWay, datagram{me, to, append([]byte(nil), p...)}})
		}
		nodes[i].deliver = func(ranks.Rank, bool, []byte) { delivered++ }
	}
	msg := make([]byte, 20*10) // 20 fragments
	round := func() {
		t.Helper()
		if err := nodes[0].send(1, false, msg, clock); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 10000 && (nodes[0].pending(1) > 0 || len(wire) > 0); i++ {
			clock += 1e6
			for len(wire) > 0 && wire[0].at <= clock {
				d := wire[0].d
				wire = wire[1:]
				h, frag, err := decodePacket(d.b)
				if err != nil {
					t.Fatal(err)
				}
				if h.kind == kindAck {
					nodes[d.to].onAck(d.from, h.seq, clock)
				} else {
					nodes[d.to].onData(d.from, h, frag, clock)
				}
				nodes[d.to].flushAcks(0, 0)
			}
			nodes[0].tick(clock)
			nodes[1].tick(clock)
		}
		if n := nodes[0].pending(1); n != 0 {
			t.Fatalf("%d packets still held", n)
		}
	}
	round()
	first := nodes[0].resent.Load()
	if first > 2 {
		t.Errorf("first message: %d retransmissions for late acks, want one per timeout (≤ 2)", first)
	}
	for range 5 {
		round()
	}
	if s := nodes[0].peers[1]; s.rto < 2*oneWay {
		t.Errorf("rto %v after round trips of %v, want ≥ the round trip", time.Duration(s.rto), time.Duration(2*oneWay))
	}
	if late := nodes[0].resent.Load() - first; late != 0 {
		t.Errorf("%d retransmissions once the round trip was measured, want 0", late)
	}
	if delivered != 6 {
		t.Errorf("%d messages delivered, want 6", delivered)
	}
}
