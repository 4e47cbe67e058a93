package sim

import "math/bits"

// Event is one entry of the event queue. Its meaning is the owner's: the
// engine only orders events. Events are plain values (no closures, no
// pointers), so that queues of millions of them cost the garbage collector
// nothing.
type Event struct {
	// At is the virtual time, in nanoseconds.
	At int64
	// Kind orders events of equal time: smaller kinds first.
	Kind uint8
	// Node is the rank the event happens at; A and B are arguments.
	Node uint32
	A    uint32
	B    uint64
}

// before is the total order of the queue: time, then kind, node and
// arguments. Ordering by content rather than by insertion makes a run
// independent of the order in which events were scheduled: two runs that
// schedule the same events in different orders process them identically.
func (e *Event) before(o *Event) bool {
	if e.At != o.At {
		return e.At < o.At
	}
	if e.Kind != o.Kind {
		return e.Kind < o.Kind
	}
	if e.Node != o.Node {
		return e.Node < o.Node
	}
	if e.A != o.A {
		return e.A < o.A
	}
	return e.B < o.B
}

// Queue is a 4-ary min-heap of events. The zero value is empty and ready.
type Queue struct {
	h []Event
}

// Len returns the number of queued events.
func (q *Queue) Len() int { return len(q.h) }

// Reset empties the queue, keeping its storage.
func (q *Queue) Reset() { q.h = q.h[:0] }

// Push adds e.
func (q *Queue) Push(e Event) {
	q.h = append(q.h, e)
	h := q.h
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !h[i].before(&h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

// Peek returns the first event; the queue must not be empty.
func (q *Queue) Peek() *Event { return &q.h[0] }

// Pop removes and returns the first event; the queue must not be empty.
func (q *Queue) Pop() Event {
	h := q.h
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	q.h = h
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		end := min(c+4, n)
		for j := c + 1; j < end; j++ {
			if h[j].before(&h[m]) {
				m = j
			}
		}
		if !h[m].before(&h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	return top
}

// radixQueue is a monotone priority queue of events: a radix heap on the
// time (a discrete-event simulation never schedules before the current
// time), whose bucket 0, the events at the current minimum time, is a
// heap ordered by the full event order. Each event moves down at most 64
// buckets, each move a sequential append: much cheaper than a heap's random
// accesses when millions of events are pending.
type radixQueue struct {
	last    int64
	n       int
	cur     Queue       // events at time last
	buckets [64][]Event // bucket i: highest bit where At differs from last is i
}

func (q *radixQueue) bucket(at int64) int {
	return bits.Len64(uint64(at^q.last)) - 1
}

func (q *radixQueue) push(e Event) {
	if e.At < q.last {
		panic("sim: event scheduled before the queue's minimum")
	}
	q.n++
	if e.At == q.last {
		q.cur.Push(e)
		return
	}
	b := q.bucket(e.At)
	q.buckets[b] = append(q.buckets[b], e)
}

// fill makes cur hold the events of the smallest time; false if empty.
func (q *radixQueue) fill() bool {
	if q.cur.Len() > 0 {
		return true
	}
	if q.n == 0 {
		return false
	}
	i := 0
	for len(q.buckets[i]) == 0 {
		i++
	}
	b := q.buckets[i]
	m := b[0].At
	for _, e := range b[1:] {
		m = min(m, e.At)
	}
	q.last = m
	for _, e := range b {
		if e.At == m {
			q.cur.Push(e)
		} else {
			j := q.bucket(e.At)
			q.buckets[j] = append(q.buckets[j], e)
		}
	}
	q.buckets[i] = b[:0]
	return true
}

func (q *radixQueue) reset() {
	q.last, q.n = 0, 0
	q.cur.Reset()
	for i := range q.buckets {
		q.buckets[i] = q.buckets[i][:0]
	}
}

// Engine is the discrete-event core: a queue and the virtual clock.
type Engine struct {
	// Now is the current virtual time in nanoseconds: the time of the
	// event being processed.
	Now int64
	// Processed counts the events popped so far.
	Processed uint64
	q         radixQueue
}

// Schedule queues e. An event in the past is a bug of the caller and
// panics: virtual time never goes backwards.
func (en *Engine) Schedule(e Event) {
	if e.At < en.Now {
		panic("sim: event scheduled in the past")
	}
	en.q.push(e)
}

// Next pops the next event no later than until, advances Now to it and
// returns it; ok is false when no such event is left (Now is unchanged).
// Once Next has returned false because of until, no event may be scheduled
// before the next pending one.
func (en *Engine) Next(until int64) (e Event, ok bool) {
	if !en.q.fill() || en.q.last > until {
		return Event{}, false
	}
	e = en.q.cur.Pop()
	en.q.n--
	en.Now = e.At
	en.Processed++
	return e, true
}

// Pending returns the number of queued events.
func (en *Engine) Pending() int { return en.q.n }

// Reset empties the queue and sets the clock to 0.
func (en *Engine) Reset() {
	en.q.reset()
	en.Now = 0
	en.Processed = 0
}
