package bench

import (
	"strings"
	"testing"
	"time"
)

// TestSummarizeGuard groups on/off steps by load and h, in the order they
// ran, and counts unsafe steps, suspicions, held checks and missed deadlines
// on each side.
func TestSummarizeGuard(t *testing.T) {
	ms := time.Millisecond
	rows := []GuardRow{
		{Load: Compute, H: ms, Round: 0, On: true, AgentReport: AgentReport{Held: 3, Missed: 1}},
		{Load: Compute, H: ms, Round: 0, On: false, AgentReport: AgentReport{Suspicions: 2, Missed: 5}},
		{Load: Compute, H: ms, Round: 1, On: false, AgentReport: AgentReport{Evicted: 1}},
		{Load: Compute, H: ms, Round: 1, On: true, AgentReport: AgentReport{Suspicions: 1, Held: 4, ProcessRT: 6}},
		{Load: "PingPong", H: 2 * ms, Round: 0, On: true},
		{Load: "PingPong", H: 2 * ms, Round: 0, On: false},
	}
	got := SummarizeGuard(rows)
	want := []GuardSummary{
		{Load: Compute, H: ms, Rounds: 2, UnsafeOn: 1, UnsafeOff: 2, SuspOn: 1, SuspOff: 2, HeldOn: 7, MissedOn: 1, MissedOff: 5, ProcessRTOn: 6},
		{Load: "PingPong", H: 2 * ms, Rounds: 1},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d groups, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("group %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestGuardUnknownOption(t *testing.T) {
	if _, err := Guard(t.Context(), GuardConfig{Option: "turbo"}); err == nil || !strings.Contains(err.Error(), "turbo") {
		t.Fatalf("unknown option: %v", err)
	}
}
