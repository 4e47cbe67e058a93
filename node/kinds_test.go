package node

import (
	"testing"

	"github.com/vigil-hpc/vigil/internal/wire"
)

// TestMsgKindsMatchWire: every message type has its name at its index in
// MsgKinds, and an unknown type is not counted.
func TestMsgKindsMatchWire(t *testing.T) {
	for name, m := range map[string]wire.Message{
		"newobserver": &wire.NewObserver{}, "leave": &wire.Leave{}, "bcast": &wire.Bcast{},
		"evicted": &wire.Evicted{}, "agree": &wire.Agree{}, "sync": &wire.Sync{},
		"probe": &wire.Probe{}, "alive": &wire.Alive{},
	} {
		if i := kindIndex(m.Type()); i < 0 || MsgKinds[i] != name {
			t.Errorf("%s (type %d): index %d", name, m.Type(), i)
		}
	}
	if kindIndex(0) != -1 || kindIndex(wire.TypeAlive+1) != -1 {
		t.Errorf("types 0 and %d counted", wire.TypeAlive+1)
	}
}
