package imb

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Comm is the point-to-point layer the Go IMB loads run on: reliable,
// ordered per pair of ranks, with sends that do not wait for the receiver
// (like MPI's eager protocol). The collectives are built on it here with
// the textbook algorithms (dissemination barrier, binomial broadcast and
// reduction), as an MPI library would.
type Comm interface {
	// Rank is this rank, Size the group's number of ranks.
	Rank() int
	Size() int
	// Send queues a copy of b for rank to.
	Send(to int, b []byte) error
	// Recv returns the next message from rank from, waiting for it.
	Recv(from int) ([]byte, error)
}

// barrier is the dissemination barrier: ⌈log2 n⌉ rounds.
func barrier(c Comm) error {
	r, n := c.Rank(), c.Size()
	for k := 1; k < n; k <<= 1 {
		if err := c.Send((r+k)%n, nil); err != nil {
			return err
		}
		if _, err := c.Recv((r - k + n) % n); err != nil {
			return err
		}
	}
	return nil
}

// bcastBytes broadcasts buf from root along a binomial tree; on return every
// rank's buf holds root's bytes.
func bcastBytes(c Comm, root int, buf []byte) error {
	n := c.Size()
	vr := (c.Rank() - root + n) % n
	mask := 1
	for mask < n {
		if vr&mask != 0 {
			m, err := c.Recv((vr - mask + root) % n)
			if err != nil {
				return err
			}
			if len(m) != len(buf) {
				return fmt.Errorf("imb: broadcast of %d bytes received %d", len(buf), len(m))
			}
			copy(buf, m)
			break
		}
		mask <<= 1
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < n {
			if err := c.Send((vr+mask+root)%n, buf); err != nil {
				return err
			}
		}
	}
	return nil
}

// allreduceSum sums vec element-wise over all ranks (binomial reduction to
// rank 0, then a binomial broadcast); on return every rank holds the sum.
func allreduceSum(c Comm, vec []float32) error {
	r, n := c.Rank(), c.Size()
	buf := make([]byte, 4*len(vec))
	for mask := 1; mask < n; mask <<= 1 {
		if r&mask != 0 {
			for i, v := range vec {
				binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
			}
			if err := c.Send(r-mask, buf); err != nil {
				return err
			}
			break
		}
		if r+mask < n {
			m, err := c.Recv(r + mask)
			if err != nil {
				return err
			}
			if len(m) != len(buf) {
				return fmt.Errorf("imb: reduction of %d bytes received %d", len(buf), len(m))
			}
			for i := range vec {
				vec[i] += math.Float32frombits(binary.LittleEndian.Uint32(m[4*i:]))
			}
		}
	}
	if r == 0 {
		for i, v := range vec {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
		}
	}
	if err := bcastBytes(c, 0, buf); err != nil {
		return err
	}
	for i := range vec {
		vec[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
	}
	return nil
}

// gatherDurations collects every rank's d on rank 0 (indexed by rank);
// other ranks get nil.
func gatherDurations(c Comm, d time.Duration) ([]time.Duration, error) {
	if c.Rank() != 0 {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(d))
		return nil, c.Send(0, b[:])
	}
	out := make([]time.Duration, c.Size())
	out[0] = d
	for r := 1; r < c.Size(); r++ {
		m, err := c.Recv(r)
		if err != nil {
			return nil, err
		}
		if len(m) != 8 {
			return nil, fmt.Errorf("imb: rank %d sent a %d-byte time", r, len(m))
		}
		out[r] = time.Duration(binary.LittleEndian.Uint64(m))
	}
	return out, nil
}
