package daemon

import (
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// HeartbeatTable is the shared-memory page of local heartbeat words: one
// 8-byte word per local process, in an anonymous memory file (memfd) that
// the daemon maps and passes to each attaching process over the Unix
// socket (SCM_RIGHTS). A process bumps its word every h from a thread of
// its own; the daemon's check reads it. A word that stops moving means the
// process stopped making progress (SIGSTOP, a deadlock of its runtime, a
// wedged node), which waitid or a pidfd cannot see.
type HeartbeatTable struct {
	f   *os.File
	mem []byte
	n   int
}

// NewHeartbeatTable creates a table of n words.
func NewHeartbeatTable(n int) (*HeartbeatTable, error) {
	if n < 1 {
		n = 1
	}
	fd, err := unix.MemfdCreate("vigil-heartbeats", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("daemon: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "vigil-heartbeats")
	size := tableSize(n)
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, fmt.Errorf("daemon: sizing the heartbeat table: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("daemon: mapping the heartbeat table: %w", err)
	}
	return &HeartbeatTable{f: f, mem: mem, n: n}, nil
}

// tableSize rounds n words up to whole pages.
func tableSize(n int) int {
	page := os.Getpagesize()
	return (n*8 + page - 1) / page * page
}

// Len returns the number of words.
func (t *HeartbeatTable) Len() int { return t.n }

// File returns the memory file, to pass to a local process.
func (t *HeartbeatTable) File() *os.File { return t.f }

// Load returns word i (an atomic load).
func (t *HeartbeatTable) Load(i int) uint64 { return atomic.LoadUint64(word(t.mem, i)) }

// Reset zeroes word i, before it is handed to a new process.
func (t *HeartbeatTable) Reset(i int) { atomic.StoreUint64(word(t.mem, i), 0) }

// Close unmaps the table and closes the file.
func (t *HeartbeatTable) Close() error {
	err := unix.Munmap(t.mem)
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// word returns a pointer to the 8-byte-aligned word i of a mapping (mmap
// returns page-aligned memory).
func word(mem []byte, i int) *uint64 { return (*uint64)(unsafe.Pointer(&mem[i*8])) }

// heartbeatWord is a process's view of its own word.
type heartbeatWord struct {
	mem []byte
	w   *uint64
}

// mapWord maps the table passed as fd (of size bytes) and returns word
// slot. It closes fd.
func mapWord(fd int, slot int) (*heartbeatWord, error) {
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("daemon: fstat of the heartbeat table: %w", err)
	}
	if slot < 0 || int64(slot+1)*8 > st.Size {
		return nil, fmt.Errorf("daemon: heartbeat slot %d outside a table of %d bytes", slot, st.Size)
	}
	mem, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("daemon: mapping the heartbeat table: %w", err)
	}
	return &heartbeatWord{mem: mem, w: word(mem, slot)}, nil
}

func (h *heartbeatWord) bump()        { atomic.AddUint64(h.w, 1) }
func (h *heartbeatWord) close() error { return unix.Munmap(h.mem) }
