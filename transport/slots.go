package transport

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/ranks"
)

// Slots is an observer's heartbeat slot array: one 64-bit sequence word per
// emitter it may observe, indexed by the emitter's rank. Emitters (an RDMA
// write, or a transport's receive path storing the received sequence) write
// a word; the observer's check is one atomic load of it. The words may live
// in mmap'ed, RDMA-registered memory: Slots never reallocates them.
type Slots struct {
	w []uint64
}

// NewSlots allocates n zeroed words (for transports whose receive path
// stores into the words; RDMA transports use SlotsOver). The words are an
// anonymous mapping, not Go heap, so that a heartbeat thread outside Go may
// load them (Word); they are unmapped once the Slots are unreachable.
func NewSlots(n int) *Slots {
	if n <= 0 {
		return &Slots{}
	}
	mem, err := unix.Mmap(-1, 0, n*8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		panic(fmt.Sprintf("transport: mapping %d slot words: %v", n, err)) // a few pages: the process is out of memory
	}
	s := &Slots{w: unsafe.Slice((*uint64)(unsafe.Pointer(&mem[0])), n)}
	runtime.AddCleanup(s, func(mem []byte) { unix.Munmap(mem) }, mem)
	return s
}

// SlotsOver wraps caller-owned words, such as an mmap'ed registered region.
// The first word must be 8-byte aligned.
func SlotsOver(words []uint64) *Slots {
	if len(words) > 0 && uintptr(unsafe.Pointer(&words[0]))%8 != 0 {
		panic("transport: slot words not 8-byte aligned")
	}
	return &Slots{w: words}
}

// Word returns emitter's word, for a heartbeat thread outside Go that
// stores or loads it directly; nil for an unknown emitter. Such a thread
// may hold the pointer only while the Slots are reachable.
func (s *Slots) Word(emitter ranks.Rank) *uint64 {
	if int(emitter) >= len(s.w) {
		return nil
	}
	return &s.w[emitter]
}

// Len returns the number of slots.
func (s *Slots) Len() int { return len(s.w) }

// Load returns emitter's current sequence word (0 if it never wrote).
func (s *Slots) Load(emitter ranks.Rank) uint64 {
	p := s.Word(emitter)
	if p == nil {
		return 0
	}
	return atomic.LoadUint64(p)
}

// Store sets emitter's word to seq if seq is larger than the current value
// (a late, reordered heartbeat never moves the word backwards). It returns
// false for an unknown emitter.
func (s *Slots) Store(emitter ranks.Rank, seq uint64) bool {
	p := s.Word(emitter)
	if p == nil {
		return false
	}
	for {
		old := atomic.LoadUint64(p)
		if seq <= old || atomic.CompareAndSwapUint64(p, old, seq) {
			return true
		}
	}
}
