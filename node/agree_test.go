package node_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/era"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport/mem"
)

// agreeCfg detects a crash within a few hundred ms on a loaded machine
// without suspecting live in-process nodes under the race detector.
var agreeCfg = node.Config{
	HeartbeatPeriod: 20 * time.Millisecond,
	SuspectTimeout:  400 * time.Millisecond,
	CheckPeriod:     20 * time.Millisecond,
	StartGrace:      2 * time.Second,
}

// quietCfg is agreeCfg for tests without failures: they check agreement,
// not detection, so δ is long enough that a loaded host cannot make a live
// rank look dead (which would end them with ErrEvicted).
var quietCfg = func() node.Config {
	c := agreeCfg
	c.SuspectTimeout = 10 * time.Second
	return c
}()

// contrib is rank r's contribution to agreement k: 8 pseudo-random bytes.
func contrib(r ranks.Rank, k uint64) []byte {
	x := uint64(r)*0x9e3779b97f4a7c15 ^ k*0xbf58476d1ce4e5b9
	x ^= x >> 31
	x *= 0x94d049bb133111eb
	x ^= x >> 29
	return binary.LittleEndian.AppendUint64(nil, x)
}

// checkOR checks the validity of a BitOR decision of agreement k among n
// ranks: it holds the contribution of every rank outside Dead, and nothing
// that no rank contributed.
func checkOR(n int, k uint64, a node.Agreement) error {
	all := make([]byte, 8)
	for r := range n {
		c := contrib(ranks.Rank(r), k)
		for i := range all {
			all[i] |= c[i]
		}
		if _, dead := slices.BinarySearch(a.Dead, ranks.Rank(r)); dead {
			continue
		}
		for i := range c {
			if a.Value[i]&c[i] != c[i] {
				return fmt.Errorf("agreement %d: value %x misses the contribution %x of live rank %d", k, a.Value, c, r)
			}
		}
	}
	for i := range all {
		if a.Value[i]&^all[i] != 0 {
			return fmt.Errorf("agreement %d: value %x has bits nobody contributed", k, a.Value)
		}
	}
	return nil
}

// sameAgreement reports whether two ranks' decisions are equal.
func sameAgreement(a, b node.Agreement) bool {
	return a.ID == b.ID && bytes.Equal(a.Value, b.Value) && slices.Equal(a.Dead, b.Dead) && a.Unacked == b.Unacked
}

// loopResult is what one rank decided in a loop of agreements.
type loopResult struct {
	decided []node.Agreement
	err     error
	evicted bool // declared dead by the detector (a false suspicion under load)
}

// runLoop runs count agreements (BitOR of contrib) on every rank not in
// skip, each rank in its own goroutine, with a timeout per agreement.
func runLoop(t *testing.T, c *cluster, count int, perAgreement time.Duration, onDecide func(r ranks.Rank, k int)) []loopResult {
	t.Helper()
	res := make([]loopResult, len(c.nodes))
	var wg sync.WaitGroup
	for i, nd := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := ranks.Rank(i)
			for k := 1; k <= count; k++ {
				ctx, cancel := context.WithTimeout(context.Background(), perAgreement)
				a, err := nd.Agree(ctx, node.OpOR, contrib(r, uint64(k)))
				cancel()
				if err != nil {
					res[i].err = fmt.Errorf("rank %d, agreement %d: %w", r, k, err)
					res[i].evicted = errors.Is(err, node.ErrEvicted)
					return
				}
				res[i].decided = append(res[i].decided, a)
				if onDecide != nil {
					onDecide(r, k)
				}
			}
		}()
	}
	wg.Wait()
	// A rank evicted after a false suspicion (a loaded machine) stopped
	// as a crashed one would: for the agreement it is one more failure.
	for i := range res {
		if res[i].evicted && !c.killed[ranks.Rank(i)] {
			t.Logf("rank %d was evicted by the detector (false suspicion under load): counted as a failure", i)
			c.killed[ranks.Rank(i)] = true
		}
	}
	return res
}

// lastDecision returns a survivor's last decision (checkLoop has checked
// that all survivors decided alike).
func lastDecision(c *cluster, res []loopResult) node.Agreement {
	for i := range res {
		if !c.killed[ranks.Rank(i)] && len(res[i].decided) > 0 {
			return res[i].decided[len(res[i].decided)-1]
		}
	}
	c.t.Fatal("no survivor")
	return node.Agreement{}
}

// checkLoop checks the four properties over the survivors of a loop:
// termination (every survivor decided every agreement), agreement (equal
// decisions), validity (checkOR) and accuracy of the dead sets (only
// killed ranks). It returns how many decisions carried a new death.
func checkLoop(t *testing.T, c *cluster, res []loopResult, count int) (flagged int) {
	t.Helper()
	n := len(c.nodes)
	var ref []node.Agreement
	for i := range res {
		r := ranks.Rank(i)
		if c.killed[r] {
			continue
		}
		if res[i].err != nil {
			t.Fatalf("survivor: %v", res[i].err)
		}
		if len(res[i].decided) != count {
			t.Fatalf("rank %d decided %d of %d agreements", r, len(res[i].decided), count)
		}
		if ref == nil {
			ref = res[i].decided
		}
		for k, a := range res[i].decided {
			if !sameAgreement(a, ref[k]) {
				t.Fatalf("agreement %d: rank %d decided %+v, another survivor %+v", k+1, r, a, ref[k])
			}
			if err := checkOR(n, uint64(k+1), a); err != nil {
				t.Fatal(err)
			}
			for _, d := range a.Dead {
				if !c.killed[d] {
					t.Fatalf("agreement %d: live rank %d in the dead set %v", k+1, d, a.Dead)
				}
			}
		}
	}
	// A killed rank's decisions equal the survivors' whenever a survivor
	// had decided too while it was alive (non-uniformity aside, which needs
	// the decider and all who learnt from it dead: rare here).
	for k, a := range ref {
		if a.Unacked {
			flagged++
		}
		if k > 0 && !a.Unacked && !slices.Equal(a.Dead, ref[k-1].Dead) && slices.ContainsFunc(a.Dead, func(d ranks.Rank) bool {
			return !slices.Contains(ref[k-1].Dead, d)
		}) {
			t.Fatalf("agreement %d: new dead ranks %v (previous %v) not flagged unacknowledged", k+1, a.Dead, ref[k-1].Dead)
		}
	}
	return flagged
}

func TestAgreeFailureFree(t *testing.T) {
	const n, count = 8, 40
	c := startCluster(t, n, quietCfg, mem.WithDelay(200*time.Microsecond, 1))
	res := runLoop(t, c, count, 20*time.Second, nil)
	if f := checkLoop(t, c, res, count); f != 0 {
		t.Fatalf("%d agreements flagged an unacknowledged failure in a failure-free run", f)
	}
	for _, a := range res[0].decided {
		if len(a.Dead) != 0 {
			t.Fatalf("dead set %v in a failure-free run", a.Dead)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	survivors := make([][]ranks.Rank, n)
	for i, nd := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := nd.Shrink(ctx)
			if err != nil {
				t.Error(err)
			}
			survivors[i] = s
		}()
	}
	wg.Wait()
	for i := range survivors {
		if !slices.Equal(survivors[i], era.All(n)) {
			t.Fatalf("rank %d: Shrink = %v, want every rank", i, survivors[i])
		}
	}
	st, err := c.nodes[0].AgreeStats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Started != count+1 || st.Decided != count+1 || st.Waiting != 0 || st.Open != 0 {
		t.Fatalf("stats %+v", st)
	}
	// The lock-free counters of Stats agree: every call returned its
	// decision, and the longest took at most their total.
	ns := c.nodes[0].Stats()
	if ns.AgreementsDecided != count+1 || ns.AgreeReturned != count+1 || ns.AgreeMaxLatencyNs <= 0 ||
		uint64(ns.AgreeMaxLatencyNs) > ns.AgreeLatencyNs {
		t.Fatalf("Stats: decided %d, returned %d, latency %d ns in all, longest %d ns; want %d, %d",
			ns.AgreementsDecided, ns.AgreeReturned, ns.AgreeLatencyNs, ns.AgreeMaxLatencyNs, count+1, count+1)
	}
}

// TestAgreeConcurrentIDs runs several streams of agreements at once, one
// epoch per stream, every rank starting the streams in its own random order.
func TestAgreeConcurrentIDs(t *testing.T) {
	const n, streams, count = 6, 5, 15
	c := startCluster(t, n, quietCfg, mem.WithDelay(300*time.Microsecond, 2))
	got := make([][][]node.Agreement, n) // rank, stream, k
	var wg sync.WaitGroup
	errs := make(chan error, n*streams)
	for i, nd := range c.nodes {
		got[i] = make([][]node.Agreement, streams)
		for s := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(i), uint64(s)))
				for k := 1; k <= count; k++ {
					time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					id := era.ID{Epoch: uint32(s + 1), Seq: uint64(k)}
					a, err := nd.AgreeID(ctx, id, node.OpMax, era.U64(uint64(i*1000+s*100+k)))
					cancel()
					if err != nil {
						errs <- err
						return
					}
					got[i][s] = append(got[i][s], a)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for s := range streams {
		for k := range count {
			want := era.U64(uint64((n-1)*1000 + s*100 + k + 1))
			for i := range n {
				a := got[i][s][k]
				if !bytes.Equal(a.Value, want) || a.ID != (era.ID{Epoch: uint32(s + 1), Seq: uint64(k + 1)}) {
					t.Fatalf("rank %d stream %d agreement %d: %+v, want value %x", i, s, k+1, a, want)
				}
			}
		}
	}
}

func TestAgreeKillsDuringAgreements(t *testing.T) {
	t.Run("fixed-tree", func(t *testing.T) { testAgreeKills(t, false) })
	t.Run("rebalanced", func(t *testing.T) { testAgreeKills(t, true) })
}

// testAgreeKills kills ranks of given roles while every rank runs a loop of
// agreements, with the tree fixed or rebuilt over the survivors of each
// agreement (Config.AgreeRebalance).
func testAgreeKills(t *testing.T, rebalance bool) {
	for _, tc := range []struct {
		name    string
		victims []ranks.Rank // killed one by one while the loop runs
	}{
		{"root", []ranks.Rank{0}},
		{"child-of-root", []ranks.Rank{1}},
		{"inner-node", []ranks.Rank{4}},
		{"root-then-leaf-then-new-root", []ranks.Rank{0, 14, 1}},
		{"several", []ranks.Rank{3, 5, 6, 2, 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n, count = 16, 60
			cfg := agreeCfg
			cfg.AgreeRebalance = rebalance
			c := startCluster(t, n, cfg, mem.WithDelay(500*time.Microsecond, uint64(len(tc.name))))
			var mu sync.Mutex
			next := 0
			// Kill victim i once some rank that is not a victim has
			// decided agreement 8 + 10·i: the kills land in the middle of
			// the loop, during agreements in progress. Any such rank will
			// do, so that a rank evicted after a false suspicion under load
			// does not stop the schedule.
			victim := map[ranks.Rank]bool{}
			for _, v := range tc.victims {
				victim[v] = true
			}
			onDecide := func(r ranks.Rank, k int) {
				mu.Lock()
				defer mu.Unlock()
				if !victim[r] && next < len(tc.victims) && k == 8+10*next {
					v := tc.victims[next]
					next++
					c.killed[v] = true
					go func() { c.net.Kill(v); c.nodes[v].Close() }()
				}
			}
			res := runLoop(t, c, count, 30*time.Second, onDecide)
			if next != len(tc.victims) {
				t.Fatalf("only %d of %d victims killed", next, len(tc.victims))
			}
			flagged := checkLoop(t, c, res, count)
			final := lastDecision(c, res)
			var want []ranks.Rank
			for r := range c.killed {
				want = append(want, r)
			}
			slices.Sort(want)
			if !slices.Equal(final.Dead, want) {
				t.Fatalf("last agreement's dead set %v, want every victim %v", final.Dead, want)
			}
			if flagged == 0 || flagged > len(want) {
				t.Fatalf("%d agreements flagged unacknowledged failures for %d victims", flagged, len(tc.victims))
			}
			for i, nd := range c.nodes {
				if c.killed[ranks.Rank(i)] {
					continue
				}
				st, err := nd.AgreeStats()
				if err != nil {
					t.Fatal(err)
				}
				if st.Open != 0 || st.Waiting != 0 {
					t.Fatalf("rank %d after the loop: %+v", i, st)
				}
				if alive := n - len(want); rebalance && st.TreeMembers != alive {
					t.Fatalf("rank %d: last tree has %d members, want the %d survivors", i, st.TreeMembers, alive)
				} else if !rebalance && st.TreeMembers != n {
					t.Fatalf("rank %d: tree of %d members without rebalancing", i, st.TreeMembers)
				}
			}
			t.Logf("%d agreements, %d failures tolerated, %d flagged unacknowledged", count, len(tc.victims), flagged)
		})
	}
}

func TestAgreeErrors(t *testing.T) {
	c := startCluster(t, 2, agreeCfg)
	nd := c.nodes[0]
	ctx := context.Background()
	if _, err := nd.Agree(ctx, node.OpCustom, nil); !errors.Is(err, node.ErrUnknownOp) {
		t.Fatalf("unknown op: %v", err)
	}
	if _, err := nd.AgreeID(ctx, era.ID{Epoch: node.AutoEpoch, Seq: 1}, node.OpAND, nil); err == nil {
		t.Fatal("AgreeID accepted the reserved epoch")
	}
	if _, err := nd.Agree(ctx, node.OpMax, []byte{1}); err == nil {
		t.Fatal("Max accepted a 1-byte operand")
	}
	// Rank 1 never joins: the agreement waits, ctx ends it here.
	id := era.ID{Epoch: 1, Seq: 1}
	if err := startAbandoned(t, nd, func(ctx context.Context) error {
		_, err := nd.AgreeID(ctx, id, node.OpAND, []byte{1})
		return err
	}); !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned agreement: %v", err)
	}
	if _, err := nd.AgreeID(ctx, id, node.OpAND, []byte{1}); !errors.Is(err, era.ErrStarted) {
		t.Fatalf("second start of %v: %v", id, err)
	}
	// Rank 1 joins later: the abandoned agreement completes for it, with
	// rank 0 answering from its core.
	long, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel2()
	a, err := c.nodes[1].AgreeID(long, id, node.OpAND, []byte{3})
	if err != nil || !bytes.Equal(a.Value, []byte{1}) {
		t.Fatalf("late joiner: %+v, %v", a, err)
	}
	if st, _ := nd.AgreeStats(); st.Waiting != 0 {
		t.Fatalf("abandoned waiter kept: %+v", st)
	}
	cfg := agreeCfg
	cfg.Size, cfg.AgreeOps = 2, []era.Op{nil}
	if err := cfg.Validate(); err == nil {
		t.Fatal("nil AgreeOps entry accepted")
	}
}

// TestAgreeRebalanceOneAtATime: with AgreeRebalance, an Agree started
// while the previous one is undecided here is refused.
func TestAgreeRebalanceOneAtATime(t *testing.T) {
	cfg := agreeCfg
	cfg.AgreeRebalance = true
	c := startCluster(t, 2, cfg)
	if err := startAbandoned(t, c.nodes[0], func(ctx context.Context) error {
		_, err := c.nodes[0].Agree(ctx, node.OpAND, nil)
		return err
	}); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.nodes[0].Agree(ctx, node.OpAND, nil); err == nil || !strings.Contains(err.Error(), "one agreement at a time") {
		t.Fatalf("second agreement while the first is open: %v", err)
	}
}

// startAbandoned runs agree (an Agree call on nd that cannot decide) until
// nd has started one more agreement, then cancels its context and returns
// its error. Waiting for the start, not for a fixed time, matters: a
// deadline that expired before the event loop took the request would leave
// the agreement never started.
func startAbandoned(t *testing.T, nd *node.Node, agree func(context.Context) error) error {
	t.Helper()
	before, err := nd.AgreeStats()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- agree(ctx) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		st, err := nd.AgreeStats()
		if err != nil {
			t.Fatal(err)
		}
		if st.Started > before.Started {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the agreement was not started in 10 s")
		}
	}
	cancel()
	select {
	case err := <-errc:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the abandoned agreement did not return after its context was cancelled")
		return nil
	}
}

// TestAgreeCustomOp runs a configured operation and a hierarchical tree.
func TestAgreeCustomOp(t *testing.T) {
	const n = 8
	cfg := quietCfg
	cfg.AgreeOps = []era.Op{era.Min}
	cfg.AgreeTree = era.NewHierarchical(era.BinaryShape, era.StarShape, []int{0, 0, 1, 1, 2, 2, 3, 3}, era.All(n))
	c := startCluster(t, n, cfg)
	var wg sync.WaitGroup
	vals := make([][]byte, n)
	for i, nd := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			a, err := nd.Agree(ctx, node.OpCustom, era.U64(uint64(100+i)))
			if err != nil {
				t.Error(err)
			}
			vals[i] = a.Value
		}()
	}
	wg.Wait()
	for i := range vals {
		if !bytes.Equal(vals[i], era.U64(100)) {
			t.Fatalf("rank %d: %x", i, vals[i])
		}
	}
}

// TestAgreeResendRecoversLostMessages: the in-memory transport drops what
// exceeds a 2-message queue per endpoint, so concurrent agreements lose
// messages; AgreeResend repeats them until every agreement completes.
func TestAgreeResendRecoversLostMessages(t *testing.T) {
	const n, streams, count = 6, 6, 5
	cfg := quietCfg
	cfg.AgreeResend = 30 * time.Millisecond
	c := startCluster(t, n, cfg, mem.WithQueueLen(2))
	var wg sync.WaitGroup
	errs := make(chan error, n*streams)
	vals := make([][][]byte, n)
	for i, nd := range c.nodes {
		vals[i] = make([][]byte, streams*count)
		for s := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 1; k <= count; k++ {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					a, err := nd.AgreeID(ctx, era.ID{Epoch: uint32(s + 1), Seq: uint64(k)}, node.OpOR, contrib(ranks.Rank(i), uint64(s*100+k)))
					cancel()
					if err != nil {
						errs <- err
						return
					}
					vals[i][s*count+k-1] = a.Value
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var dropped uint64
	for i, nd := range c.nodes {
		dropped += nd.Stats().Transport.MsgsDropped
		for j := range vals[i] {
			if !bytes.Equal(vals[i][j], vals[0][j]) {
				t.Fatalf("rank %d, agreement %d: %x, rank 0 %x", i, j, vals[i][j], vals[0][j])
			}
		}
	}
	if dropped == 0 {
		t.Fatal("no message was dropped: the test shows nothing")
	}
	t.Logf("%d agreements completed at %d ranks although the transport dropped %d messages", streams*count, n, dropped)
}
