package verbs

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// BenchmarkMessageLatencyProcs is BenchmarkMessageLatency with the echoing
// rank in another process, as ib_send_lat runs its client and server: no
// Go runtime, scheduler or CPU budget is shared between the two ends.
func BenchmarkMessageLatencyProcs(b *testing.B) {
	me, pong := echoPeer(b, nil)
	msg := make([]byte, 32)
	ping := func() time.Duration {
		t0 := time.Now()
		if err := me.Send(1, msg); err != nil {
			b.Fatal(err)
		}
		select {
		case <-pong:
		case <-time.After(10 * time.Second):
			b.Fatal("no pong from the echo process")
		}
		return time.Since(t0)
	}
	for range 20 { // warm-up: address handles, first-message paths
		ping()
	}
	rtt := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range rtt {
		rtt[i] = ping()
	}
	b.StopTimer()
	reportOneWay(b, rtt)
	b.ReportMetric(float64(me.VerbsStats().Retransmits), "retransmits")
}

// BenchmarkMessageLatencyHandler is BenchmarkMessageLatencyProcs with
// each next ping sent from rank 0's handler, as ib_send_lat posts its
// next send on the receive completion and as a runtime that answers in
// its handler does: no goroutine hand-off at either end, so it is the
// transport's own one-way time, to set against ib_send_lat.
// BenchmarkMessageLatencyProcs adds rank 0's hand-off to a consumer
// goroutine.
func BenchmarkMessageLatencyHandler(b *testing.B) {
	const warm = 20 // address handles, first-message paths
	msg := make([]byte, 32)
	rtt := make([]time.Duration, 0, b.N)
	done := make(chan error, 1)
	var me *Transport
	var last time.Time
	n := 0
	me, _ = echoPeer(b, func(from ranks.Rank, _ []byte) {
		t := time.Now()
		if n >= warm {
			rtt = append(rtt, t.Sub(last))
		}
		n++
		if n == warm+b.N {
			done <- nil
			return
		}
		last = time.Now()
		if err := me.Send(from, msg); err != nil {
			done <- err
		}
	})
	b.ResetTimer()
	last = time.Now()
	if err := me.Send(1, msg); err != nil {
		b.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			b.Fatal(err)
		}
	case <-time.After(time.Duration(warm+b.N)*10*time.Millisecond + 10*time.Second):
		b.Fatalf("ping-pong stalled after %d round trips", len(rtt))
	}
	b.StopTimer()
	reportOneWay(b, rtt)
	b.ReportMetric(float64(me.VerbsStats().Retransmits), "retransmits")
}

// coldGap is how long both ends of BenchmarkMessageLatencyCold stay idle
// before each message: far past Config.PollFor, so the receiver sleeps on
// its completion channel, as it does before a failure notification.
const coldGap = 120 * time.Millisecond

// BenchmarkMessageLatencyCold is BenchmarkMessageLatencyProcs for the
// first message after coldGap of silence. Its one-way time is measured,
// not halved: the echo process reads CLOCK_MONOTONIC (one clock for both
// processes) in its handler and returns the reading, so ns_oneway_p50 is
// the cold leg alone, from the Send call to the receiver's handler;
// ns_rtt_p50 is the whole round trip.
func BenchmarkMessageLatencyCold(b *testing.B) {
	me, pong := echoPeer(b, nil)
	msg := []byte("T cold ping")
	ping := func() (oneway, rtt time.Duration) {
		time.Sleep(coldGap)
		t0 := time.Now()
		m0 := monoNanos()
		if err := me.Send(1, msg); err != nil {
			b.Fatal(err)
		}
		select {
		case p := <-pong:
			rtt = time.Since(t0)
			if len(p) != 8 {
				b.Fatalf("pong of %d bytes, want the echo's 8-byte clock reading", len(p))
			}
			oneway = time.Duration(int64(binary.LittleEndian.Uint64(p)) - m0)
		case <-time.After(10 * time.Second):
			b.Fatal("no pong from the echo process")
		}
		return oneway, rtt
	}
	for range 3 { // first-message paths
		ping()
	}
	ow := make([]time.Duration, b.N)
	rtt := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range ow {
		ow[i], rtt[i] = ping()
	}
	b.StopTimer()
	slices.Sort(ow)
	slices.Sort(rtt)
	b.ReportMetric(float64(ow[len(ow)/2].Nanoseconds()), "ns_oneway_p50")
	b.ReportMetric(float64(rtt[len(rtt)/2].Nanoseconds()), "ns_rtt_p50")
}

// monoNanos reads CLOCK_MONOTONIC, which every process of the machine
// shares.
func monoNanos() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

// echoPeer starts rank 0 here and rank 1 in a child process running
// echoProcess, and returns rank 0 and the channel of the payloads rank 1
// sends back (to h instead, if not nil: the channel is then nil). The
// child is stopped at cleanup.
func echoPeer(b *testing.B, h transport.Handler) (*Transport, chan []byte) {
	needDevice(b)
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	me, err := Open(testConfig(0, 2, 9, logger(b)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { me.Close() })
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "VIGIL_ECHO_PROCESS=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Close() // the echo process exits when its stdin closes
		if err := cmd.Wait(); err != nil {
			b.Errorf("echo process: %v", err)
		}
	})
	out := bufio.NewScanner(outPipe)
	var peer string
	for out.Scan() {
		if a, ok := strings.CutPrefix(out.Text(), "ECHO-ADDR "); ok {
			peer = a
			break
		}
	}
	if peer == "" {
		b.Fatal("the echo process printed no address")
	}
	addrs := []string{me.Addr(), peer}
	fmt.Fprintf(in, "%s\n%s\n", addrs[0], addrs[1])
	var pong chan []byte
	if h == nil {
		pong = make(chan []byte, 1)
		h = func(_ ranks.Rank, p []byte) { pong <- slices.Clone(p) }
	}
	if err := me.Start(addrs, h); err != nil {
		b.Fatal(err)
	}
	return me, pong
}

// TestMain runs the echo end of BenchmarkMessageLatencyProcs instead of
// the tests when that benchmark starts this binary as its child.
func TestMain(m *testing.M) {
	if os.Getenv("VIGIL_ECHO_PROCESS") == "1" {
		if err := echoProcess(); err != nil {
			fmt.Fprintln(os.Stderr, "echo process:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// echoProcess opens rank 1, prints its address, reads both addresses from
// stdin, echoes every message back (a message starting with 'T' is
// answered with the CLOCK_MONOTONIC reading at its arrival instead) and
// returns when stdin closes.
func echoProcess() error {
	tr, err := Open(testConfig(1, 2, 9, nil))
	if err != nil {
		return err
	}
	defer tr.Close()
	fmt.Printf("ECHO-ADDR %s\n", tr.Addr())
	in := bufio.NewScanner(os.Stdin)
	var addrs []string
	for len(addrs) < 2 && in.Scan() {
		addrs = append(addrs, in.Text())
	}
	if len(addrs) != 2 {
		return fmt.Errorf("read %d addresses from stdin, want 2", len(addrs))
	}
	echo := func(from ranks.Rank, p []byte) {
		if len(p) > 0 && p[0] == 'T' { // BenchmarkMessageLatencyCold: the arrival time
			tr.Send(from, binary.LittleEndian.AppendUint64(nil, uint64(monoNanos())))
			return
		}
		tr.Send(from, p)
	}
	if err := tr.Start(addrs, echo); err != nil {
		return err
	}
	for in.Scan() { // until stdin closes
	}
	return nil
}
