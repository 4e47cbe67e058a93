package era

import (
	"encoding/binary"
	"fmt"
)

// Op is the paper's operation F: an associative, commutative, idempotent
// binary operation on agreement values. Together with ⊥ (no value yet,
// handled by the core) the values form a monoid of identity ⊥ (Section 2).
//
// Besides Op, every agreement also decides two implicit parts that the core
// combines itself: the union of the contributors' known-dead sets and the
// intersection of their acknowledged sets (see Decision).
type Op interface {
	// Merge returns F(acc, v). It may overwrite acc and return it (the core
	// owns acc); it must neither modify v nor keep a reference to it. Both
	// operands have passed Check.
	Merge(acc, v []byte) []byte
	// Check reports whether v is a valid operand. The core rejects
	// contributions and drops messages whose value fails it.
	Check(v []byte) error
}

// Built-in operations.
var (
	// BitAND is the bitwise AND of byte strings, as MPI_Comm_agree does on
	// its integer flag. Strings of different lengths are combined as if the
	// shorter one were padded with 0xFF (the identity of AND).
	BitAND Op = bitOp{and: true}
	// BitOR is the bitwise OR of byte strings; the shorter operand is
	// padded with 0x00 (the identity of OR).
	BitOR Op = bitOp{}
	// Min is the minimum of unsigned little-endian 64-bit integers
	// (operands must be exactly 8 bytes).
	Min Op = u64Op{max: false}
	// Max is the maximum of unsigned little-endian 64-bit integers
	// (operands must be exactly 8 bytes).
	Max Op = u64Op{max: true}
)

type bitOp struct{ and bool }

// Merge implements Op.
func (o bitOp) Merge(acc, v []byte) []byte {
	n := min(len(acc), len(v))
	if o.and {
		for i := range n {
			acc[i] &= v[i]
		}
	} else {
		for i := range n {
			acc[i] |= v[i]
		}
	}
	// The missing bytes of acc are the identity: F(identity, x) = x.
	return append(acc, v[n:]...)
}

// Check implements Op: any byte string is valid.
func (bitOp) Check([]byte) error { return nil }

// String names the operation.
func (o bitOp) String() string {
	if o.and {
		return "BitAND"
	}
	return "BitOR"
}

type u64Op struct{ max bool }

// Merge implements Op.
func (o u64Op) Merge(acc, v []byte) []byte {
	a, b := binary.LittleEndian.Uint64(acc), binary.LittleEndian.Uint64(v)
	if (o.max && b > a) || (!o.max && b < a) {
		copy(acc, v)
	}
	return acc
}

// Check implements Op: operands are 8 bytes.
func (o u64Op) Check(v []byte) error {
	if len(v) != 8 {
		return fmt.Errorf("era: %v operand is %d bytes, want 8", o, len(v))
	}
	return nil
}

// String names the operation.
func (o u64Op) String() string {
	if o.max {
		return "Max"
	}
	return "Min"
}

// U64 encodes x as the 8-byte little-endian operand of Min and Max.
func U64(x uint64) []byte { return binary.LittleEndian.AppendUint64(nil, x) }
