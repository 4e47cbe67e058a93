package wire

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vigil-hpc/vigil/era"
	"github.com/vigil-hpc/vigil/ranks"
)

// agreeSamples returns valid Agree messages of every kind.
func agreeSamples() []*Agree {
	dead := ranks.Of(3, 9, 40)
	return []*Agree{
		{Op: 0, Msg: era.Msg{Kind: era.Up, ID: era.ID{Epoch: 0, Seq: 1}, Value: []byte{0xff, 1}, Dead: dead, Acked: dead.Clone(), Collect: 1}},
		{Op: 3, Msg: era.Msg{Kind: era.Down, ID: era.ID{Epoch: 7, Seq: 1 << 40}, Value: era.U64(12), Dead: dead, Acked: ranks.Of(9), Collect: 1 << 39}},
		{Op: 1, Msg: era.Msg{Kind: era.ResultRequest, ID: era.ID{Epoch: 2, Seq: 5}, Dead: dead}},
		{Op: 2, Msg: era.Msg{Kind: era.Up, ID: era.ID{Seq: 2}}},
	}
}

func TestAgreeRoundTrip(t *testing.T) {
	for _, a := range agreeSamples() {
		b := AppendMessage(nil, a)
		if typ, err := PeekType(b); err != nil || typ != TypeAgree {
			t.Fatalf("PeekType = %v, %v", typ, err)
		}
		got, err := DecodeMessage(b, 41)
		if err != nil {
			t.Fatalf("decode %v: %v", a.Kind, err)
		}
		g := got.(*Agree)
		if g.Op != a.Op || g.Kind != a.Kind || g.ID != a.ID || !bytes.Equal(g.Value, a.Value) ||
			!g.Dead.Equal(a.Dead) || !g.Acked.Equal(a.Acked) || g.Collect != a.Collect {
			t.Fatalf("round trip:\n got %+v\nwant %+v", g, a)
		}
		if again := AppendMessage(nil, got); !bytes.Equal(again, b) {
			t.Fatal("re-encoding differs")
		}
		for k := 1; k < len(b); k++ {
			if _, err := DecodeMessage(b[:k], 41); err == nil {
				t.Fatalf("prefix of %d/%d bytes accepted", k, len(b))
			}
		}
	}
}

func TestAgreeRejects(t *testing.T) {
	up := AppendMessage(nil, agreeSamples()[0]) // ranks up to 40
	// acked mode 1 with acked = dead is a non-canonical spelling of mode 0.
	nonCanon := append(bytes.Clone(up[:len(up)-1]), 1)
	nonCanon = append(nonCanon, up[len(up)-1-4:len(up)-1]...) // the dead set again (4 bytes)
	badKind := bytes.Clone(up)
	badKind[2] = 1<<4 | 9
	for _, tc := range []struct {
		name   string
		b      []byte
		n      int
		field  string
		reason string
	}{
		{"rank above the bound", up, 40, "agree.msg.dead", ReasonUnknownRank},
		{"no op", []byte{byte(TypeAgree)}, 0, "agree.op", ReasonTruncated},
		{"no body", []byte{byte(TypeAgree), 0}, 0, "agree.msg.type", ReasonTruncated},
		{"unknown kind", badKind, 0, "agree.msg.type", ReasonBadPayload},
		{"trailing byte", append(bytes.Clone(up), 0), 0, "agree.msg", ReasonBadPayload},
		{"non-canonical", nonCanon, 0, "agree.msg", ReasonBadPayload},
	} {
		_, err := DecodeMessage(tc.b, tc.n)
		e, ok := err.(*Error)
		if tc.name == "non-canonical" && (err == nil || !strings.Contains(err.Error(), "non-canonical")) {
			t.Errorf("%s: err %v", tc.name, err)
		}
		if !ok || e.Field != tc.field || e.Reason() != tc.reason {
			t.Errorf("%s: err %v, want field %q reason %q", tc.name, err, tc.field, tc.reason)
		}
	}
	if _, err := DecodeMessage(up, 41); err != nil {
		t.Fatal(err)
	}
	// An Agree that era cannot encode does not decode.
	bad := AppendMessage(nil, &Agree{Msg: era.Msg{Kind: 9}})
	if _, err := DecodeMessage(bad, 0); err == nil || !strings.Contains(err.Error(), "agree.msg") {
		t.Fatalf("unencodable message: %v", err)
	}
}
