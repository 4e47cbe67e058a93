package verbs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// BenchmarkRCPingPongProcs is the floor under any Go message path on the
// device: a 32-byte inline RC SEND ping-pong between two Go processes,
// each busy-polling one CQ through this package, with no transport above
// it (no framing, MAC, reliability, engine or goroutine hand-off). It is
// ib_send_lat's pattern with Go's cgo calls and runtime; lab/rxe/run.sh sets
// the transport's two-process one-way time against it.
func BenchmarkRCPingPongProcs(b *testing.B) {
	needDevice(b)
	me, err := newPingPongEnd()
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := me.ctx.Close(); err != nil {
			b.Error(err)
		}
	}()
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), "VIGIL_PINGPONG_CHILD=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		in.Close() // the child exits when its stdin closes
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				b.Errorf("ping-pong child: %v", err)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			b.Error("ping-pong child did not exit")
		}
	}()
	if err := json.NewEncoder(in).Encode(me.qp.Endpoint()); err != nil {
		b.Fatal(err)
	}
	var peer Endpoint
	if err := json.NewDecoder(out).Decode(&peer); err != nil {
		b.Fatalf("the child's endpoint: %v", err)
	}
	if err := me.qp.Connect(peer, nil); err != nil {
		b.Fatal(err)
	}
	msg := make([]byte, 32)
	rtt := make([]time.Duration, 0, b.N)
	for i := range b.N + 20 { // 20 warm-up rounds
		t0 := time.Now()
		if err := me.qp.PostSendInline(1, msg, i%16 == 15); err != nil {
			b.Fatal(err)
		}
		if err := me.await(5 * time.Second); err != nil {
			b.Fatal(err)
		}
		if i >= 20 {
			rtt = append(rtt, time.Since(t0))
		}
	}
	b.StopTimer()
	slices.Sort(rtt)
	b.ReportMetric(float64(rtt[len(rtt)/2].Nanoseconds())/2, "ns_oneway_p50")
}

// pingPongEnd is one end of BenchmarkRCPingPongProcs: an RC QP whose sends
// and receives complete on one CQ, with 32 receive buffers.
type pingPongEnd struct {
	ctx *Context
	qp  *QP
	cq  *CQ
	mr  *MR
	wcs []WC
}

const pingPongBuf = 256

// errNoMessage: await's limit passed without a message.
var errNoMessage = errors.New("no message within the limit")

func newPingPongEnd() (*pingPongEnd, error) {
	c, err := Open(os.Getenv("VIGIL_RXE_DEV"))
	if err != nil {
		return nil, err
	}
	e := &pingPongEnd{ctx: c, wcs: make([]WC, 8)}
	pd, err := c.AllocPD()
	if err == nil {
		e.cq, err = c.CreateCQ(256, false)
	}
	if err == nil {
		e.mr, err = pd.AllocMR(32*pingPongBuf, AccessLocalWrite)
	}
	if err == nil {
		e.qp, err = pd.CreateQP(QPConfig{Type: RC, SendCQ: e.cq, RecvCQ: e.cq, MaxInline: 64,
			Netdev: os.Getenv("VIGIL_RXE_NETDEV")})
	}
	for i := 0; err == nil && i < 32; i++ {
		err = e.qp.PostRecv(uint64(i), e.mr, i*pingPongBuf, pingPongBuf)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return e, nil
}

// await busy-polls until a receive completes and reposts its buffer;
// send completions are retired on the way.
func (e *pingPongEnd) await(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for k := 0; ; k++ {
		n, err := e.cq.Poll(e.wcs)
		if err != nil {
			return err
		}
		for _, wc := range e.wcs[:n] {
			if err := wc.Err(); err != nil {
				return err
			}
			if wc.Opcode == WCRecv {
				return e.qp.PostRecv(wc.WRID, e.mr, int(wc.WRID)*pingPongBuf, pingPongBuf)
			}
		}
		if k%4096 == 4095 && time.Now().After(deadline) {
			return errNoMessage
		}
	}
}

// pingPongChild is the echoing end, run when BenchmarkRCPingPongProcs
// starts the test binary as its child: it reads the parent's endpoint on
// stdin, prints its own, answers every message and exits when stdin
// closes.
func pingPongChild() error {
	var peer Endpoint
	if err := json.NewDecoder(os.Stdin).Decode(&peer); err != nil {
		return fmt.Errorf("the parent's endpoint: %w", err)
	}
	e, err := newPingPongEnd()
	if err != nil {
		return err
	}
	if err := json.NewEncoder(os.Stdout).Encode(e.qp.Endpoint()); err != nil {
		return err
	}
	if err := e.qp.Connect(peer, nil); err != nil {
		return err
	}
	quit := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(quit)
	}()
	msg := make([]byte, 32)
	for i := 0; ; i++ {
		for {
			err := e.await(100 * time.Millisecond)
			if err == nil {
				break
			}
			select {
			case <-quit:
				return e.ctx.Close()
			default:
			}
			if !errors.Is(err, errNoMessage) {
				return err
			}
		}
		if err := e.qp.PostSendInline(1, msg, i%16 == 15); err != nil {
			return err
		}
	}
}

// TestMain runs pingPongChild instead of the tests when
// BenchmarkRCPingPongProcs starts this binary as its child.
func TestMain(m *testing.M) {
	if os.Getenv("VIGIL_PINGPONG_CHILD") == "1" {
		if err := pingPongChild(); err != nil {
			fmt.Fprintln(os.Stderr, "ping-pong child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
