package main

import (
	"testing"

	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/node"
)

// TestStatsNames: vigil.h's message kinds are node.MsgKinds in the same
// order, and every rejection reason of the wire format and of TCP has a
// slot of its own in vigil_stats.rejected_by.
func TestStatsNames(t *testing.T) {
	if node.NumMsgKinds > numMsgKindSlots {
		t.Fatalf("%d message kinds, %d slots in vigil_stats", node.NumMsgKinds, numMsgKindSlots)
	}
	for k := range numMsgKindSlots {
		want := ""
		if k < node.NumMsgKinds {
			want = node.MsgKinds[k]
		}
		if got := msgKindName(k); got != want {
			t.Errorf("vigil_msg_kind_name(%d) = %q, want %q", k, got, want)
		}
	}
	seen := map[int]string{}
	for _, r := range []string{wire.ReasonBadMagic, wire.ReasonBadVersion, wire.ReasonBadType, wire.ReasonForeignJob,
		wire.ReasonBadTag, wire.ReasonTruncated, wire.ReasonTooLarge, wire.ReasonUnknownRank, wire.ReasonStale,
		wire.ReasonNoHello, wire.ReasonMisdirected, wire.ReasonBadPayload, "hello_timeout", "wrong_source_qp",
		wire.ReasonWrongReceiver, wire.ReasonWrongIncarnation, wire.ReasonUnbound, wire.ReasonOldHeartbeat} {
		i := rejectIndex(r)
		if i == 0 || seen[i] != "" {
			t.Errorf("reason %s: slot %d (already %q)", r, i, seen[i])
		}
		seen[i] = r
	}
	if rejectIndex("a reason from later") != 0 {
		t.Errorf("an unknown reason is not counted as other")
	}
}
