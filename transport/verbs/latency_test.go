package verbs

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/ranks"
)

// BenchmarkMessageLatencyProcs is BenchmarkMessageLatency with the echoing
// rank in another process, as ib_send_lat runs its client and server: no
// Go runtime, scheduler or CPU budget is shared between the two ends.
func BenchmarkMessageLatencyProcs(b *testing.B) {
	needDevice(b)
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	me, err := Open(testConfig(0, 2, 9, logger(b)))
	if err != nil {
		b.Fatal(err)
	}
	defer me.Close()
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
	defer func() {
		in.Close() // the echo process exits when its stdin closes
		if err := cmd.Wait(); err != nil {
			b.Errorf("echo process: %v", err)
		}
	}()
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
	pong := make(chan struct{}, 1)
	if err := me.Start(addrs, func(ranks.Rank, []byte) { pong <- struct{}{} }); err != nil {
		b.Fatal(err)
	}
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
// stdin, echoes every message back and returns when stdin closes.
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
	if err := tr.Start(addrs, func(from ranks.Rank, p []byte) { tr.Send(from, p) }); err != nil {
		return err
	}
	for in.Scan() { // until stdin closes
	}
	return nil
}
