package era

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

func TestOpsAreSemilattices(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	gen := func(fixed bool) []byte {
		n := 8
		if !fixed {
			n = rng.IntN(6)
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	f := func(op Op, a, b []byte) []byte { return op.Merge(bytes.Clone(a), b) }
	for _, tc := range []struct {
		name  string
		op    Op
		fixed bool
	}{{"BitAND", BitAND, false}, {"BitOR", BitOR, false}, {"Min", Min, true}, {"Max", Max, true}} {
		for range 2000 {
			a, b, c := gen(tc.fixed), gen(tc.fixed), gen(tc.fixed)
			if !bytes.Equal(f(tc.op, a, b), f(tc.op, b, a)) {
				t.Fatalf("%s not commutative on %x %x", tc.name, a, b)
			}
			if !bytes.Equal(f(tc.op, f(tc.op, a, b), c), f(tc.op, a, f(tc.op, b, c))) {
				t.Fatalf("%s not associative on %x %x %x", tc.name, a, b, c)
			}
			if !bytes.Equal(f(tc.op, a, a), a) {
				t.Fatalf("%s not idempotent on %x", tc.name, a)
			}
			bb := bytes.Clone(b)
			f(tc.op, a, b)
			if !bytes.Equal(b, bb) {
				t.Fatalf("%s modified its second operand", tc.name)
			}
		}
	}
	if got := BitAND.Merge([]byte{0xf0, 0x0f}, []byte{0x3c}); !bytes.Equal(got, []byte{0x30, 0x0f}) {
		t.Fatalf("BitAND = %x", got)
	}
	if got := Min.Merge(U64(5), U64(3)); !bytes.Equal(got, U64(3)) {
		t.Fatalf("Min = %x", got)
	}
	if got := Max.Merge(U64(1<<40), U64(3)); !bytes.Equal(got, U64(1<<40)) {
		t.Fatalf("Max = %x", got)
	}
	if Min.Check(make([]byte, 7)) == nil || Max.Check(nil) == nil || Min.Check(U64(1)) != nil || BitAND.Check(nil) != nil {
		t.Fatal("Check")
	}
}
