package heartbeat_test

import (
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/heartbeat"
	"github.com/vigil-hpc/vigil/lab/testnet"
	"github.com/vigil-hpc/vigil/ranks"
)

type recorder struct {
	mu   sync.Mutex
	sent []struct {
		to  ranks.Rank
		seq uint64
	}
	got chan struct{}
}

func (r *recorder) send(to ranks.Rank, seq uint64) error {
	r.mu.Lock()
	r.sent = append(r.sent, struct {
		to  ranks.Rank
		seq uint64
	}{to, seq})
	r.mu.Unlock()
	select {
	case r.got <- struct{}{}:
	default:
	}
	return nil
}

func (r *recorder) waitFor(t *testing.T, pred func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		ok := pred()
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.got:
		case <-deadline:
			t.Fatal("emitter did not do it within 10 s")
		}
	}
}

func TestEmitterSendsIncreasingAndRetargets(t *testing.T) {
	leaks := testnet.NoLeaks(t, 5*time.Second)
	rec := &recorder{got: make(chan struct{}, 1)}
	e, err := heartbeat.NewEmitter(heartbeat.EmitterConfig{Period: int64(5 * time.Millisecond), CPU: -1, Send: rec.send})
	if err != nil {
		t.Fatal(err)
	}
	e.SetObserver(3)
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, func() bool { return len(rec.sent) >= 3 })
	e.SetObserver(7)
	rec.waitFor(t, func() bool { return rec.sent[len(rec.sent)-1].to == 7 })
	e.Pause()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i := 1; i < len(rec.sent); i++ {
		if rec.sent[i].seq <= rec.sent[i-1].seq {
			t.Fatalf("sequence not increasing: %v", rec.sent)
		}
	}
	if st := e.Stats(); st.Sent != uint64(len(rec.sent)) {
		t.Fatalf("stats say %d sent, recorder saw %d", st.Sent, len(rec.sent))
	}
	leaks()
}

func TestEmitterConfigErrors(t *testing.T) {
	if _, err := heartbeat.NewEmitter(heartbeat.EmitterConfig{Period: 0, Send: func(ranks.Rank, uint64) error { return nil }}); err == nil {
		t.Fatal("zero period accepted")
	}
	if _, err := heartbeat.NewEmitter(heartbeat.EmitterConfig{Period: 1}); err == nil {
		t.Fatal("nil Send accepted")
	}
	for _, p := range []int{-1, 100} {
		if _, err := heartbeat.NewEmitter(heartbeat.EmitterConfig{Period: 1, Priority: p, Send: func(ranks.Rank, uint64) error { return nil }}); err == nil {
			t.Fatalf("priority %d accepted", p)
		}
	}
}

func TestEmitterCloseWithoutStart(t *testing.T) {
	e, err := heartbeat.NewEmitter(heartbeat.EmitterConfig{Period: 1e6, CPU: -1, Send: func(ranks.Rank, uint64) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}
