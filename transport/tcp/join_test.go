package tcp

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// TestJoinExchangesAndConnects joins two ranks through an in-test exchange
// (what a bootstrap does) and checks a message crosses.
func TestJoinExchangesAndConnects(t *testing.T) {
	const n = 2
	var mu sync.Mutex
	addrs := make([]string, n)
	published := make(chan struct{})
	count := 0
	exchange := func(self int) Exchanger {
		return func(ctx context.Context, addr string) ([]string, error) {
			mu.Lock()
			addrs[self] = addr
			if count++; count == n {
				close(published)
			}
			mu.Unlock()
			select {
			case <-published:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), addrs...), nil
		}
	}
	col := newCollector()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ts := make([]*Transport, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			tr, err := Join(ctx, testConfig(uint32(i), n, transport.NewSlots(n), col.handler(ranks.Rank(i))), exchange(i))
			ts[i] = tr
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, tr := range ts {
			tr.Close()
		}
	}()
	ts[0].Send(1, msg(0))
	waitFor(t, "the message from rank 0", func() bool { return col.count.Load() == 1 })
	col.check(t)
}

// TestJoinExchangeErrorClosesTheListener checks that a failed exchange is
// returned and leaves no listener behind.
func TestJoinExchangeErrorClosesTheListener(t *testing.T) {
	var addr string
	boom := errors.New("fence failed")
	tr, err := Join(context.Background(), testConfig(0, 2, transport.NewSlots(2), newCollector().handler(0)),
		func(_ context.Context, a string) ([]string, error) { addr = a; return nil, boom })
	if !errors.Is(err, boom) || tr != nil {
		t.Fatalf("Join = %v, %v; want nil, %v", tr, err, boom)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("listener %s still accepts after a failed Join", addr)
	}
}
