package verbs

import (
	"runtime"
	"sync"
	"testing"

	"github.com/vigil-hpc/vigil/ranks"
)

// The to-do list keeps its order, bounds only the senders' commands, and
// its length is seen without its mutex.
func TestTodoOrderAndBound(t *testing.T) {
	var l todo
	for i := range todoMax {
		if !l.put(cmd{op: opSend, to: ranks.Rank(i)}, true) {
			t.Fatalf("put %d of %d refused", i, todoMax)
		}
	}
	if l.put(cmd{op: opSend}, true) {
		t.Fatalf("a sender's command beyond %d was taken", todoMax)
	}
	if !l.put(cmd{op: opDo, to: 7}, false) {
		t.Fatal("a link worker's result was refused on a full list")
	}
	if got := l.len(); got != todoMax+1 {
		t.Fatalf("len = %d, want %d", got, todoMax+1)
	}
	cs := l.take(nil)
	if len(cs) != todoMax+1 || l.len() != 0 {
		t.Fatalf("took %d, %d left; want %d and 0", len(cs), l.len(), todoMax+1)
	}
	for i, c := range cs[:todoMax] {
		if c.to != ranks.Rank(i) {
			t.Fatalf("command %d is for rank %d: order lost", i, c.to)
		}
	}
	if cs[todoMax].op != opDo {
		t.Fatal("the link worker's result is not last")
	}
	if !l.put(cmd{op: opSend}, true) {
		t.Fatal("the bound did not reset when the list was taken")
	}
	if got := l.take(cs); len(got) != 1 {
		t.Fatalf("took %d, want 1", len(got))
	}
}

// Commands put from several goroutines are each taken once, those of one
// goroutine in its order.
func TestTodoConcurrent(t *testing.T) {
	const writers, each = 4, 500
	var l todo
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if !l.put(cmd{to: ranks.Rank(w), seq: uint64(i)}, w%2 == 0) {
					t.Errorf("writer %d: command %d refused", w, i)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	next := make([]uint64, writers)
	var buf []cmd
	check := func() {
		cs := l.take(buf)
		for _, c := range cs {
			if c.seq != next[c.to] {
				t.Fatalf("writer %d: command %d after %d", c.to, c.seq, next[c.to])
			}
			next[c.to]++
		}
		buf = cs[:0]
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			runtime.Gosched()
		}
		check() // while the writers put, and once after
	}
	for w, n := range next {
		if n != each {
			t.Errorf("writer %d: took %d commands, want %d", w, n, each)
		}
	}
	if l.len() != 0 {
		t.Fatalf("%d commands left", l.len())
	}
}
