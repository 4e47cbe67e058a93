package wire

import (
	"bytes"

	"github.com/vigil-hpc/vigil/era"
	"github.com/vigil-hpc/vigil/ranks"
)

// TypeAgree is the type byte of an Agree message.
const TypeAgree MsgType = 5

// Agree carries one message of the Early Returning Agreement (package era,
// seed 001) between the agreement cores of two nodes. Op is the code of the
// agreement operation the message belongs to (the node runtime keeps one
// era.Core per operation); Msg is the UP, DOWN or RESULTREQUEST itself.
type Agree struct {
	Op uint8
	era.Msg
}

// Type implements Message.
func (*Agree) Type() MsgType { return TypeAgree }

// AppendTo encodes: type, op, then the era.Msg encoding (version 1, see
// AppendEraMsg). A Msg that AppendEraMsg refuses (an unknown kind, a
// ResultRequest with a value) is written without its body, which every
// receiver rejects; the era cores never build such messages.
func (m *Agree) AppendTo(dst []byte) []byte {
	dst = append(dst, byte(TypeAgree), m.Op)
	dst, _ = AppendEraMsg(dst, &m.Msg)
	return dst
}

// agree decodes the rest of an Agree message (everything after the type).
// The encoding must be canonical (it re-encodes to the same bytes), and with
// a rank bound every rank of its sets must be below it.
func (d *decoder) agree() *Agree {
	m := &Agree{Op: d.byte1("agree.op")}
	if d.err != nil {
		return nil
	}
	body := d.b
	d.b = nil
	msg, e := decodeEraMsg(body)
	if e != nil {
		d.fail(e.reason, "agree."+e.Field, "%s", e.Detail)
		return nil
	}
	m.Msg = msg
	if again, _ := AppendEraMsg(nil, &m.Msg); !bytes.Equal(again, body) {
		d.fail(ReasonBadPayload, "agree.msg", "non-canonical encoding")
		return nil
	}
	if d.n > 0 {
		for _, s := range []struct {
			field string
			rs    []ranks.Rank
		}{{"agree.msg.dead", m.Dead.Members()}, {"agree.msg.acked", m.Acked.Members()}} {
			if k := len(s.rs); k > 0 && uint64(s.rs[k-1]) >= uint64(d.n) {
				d.fail(ReasonUnknownRank, s.field, "rank %d not below %d", s.rs[k-1], d.n)
				return nil
			}
		}
	}
	return m
}
