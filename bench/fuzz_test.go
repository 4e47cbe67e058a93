package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// FuzzParseMPIOutput: any output either parses into results that
// satisfy the line format's constraints or gives an error; never a panic.
func FuzzParseMPIOutput(f *testing.F) {
	f.Add("imb,PingPong,2,1024,1000,0.775,0.780,0.777\nvigil,1,2,0\n")
	f.Add("imb,Barrier,2,0,1,1,1,1")
	f.Add("vigil,1,2,x\nimb,")
	f.Fuzz(func(t *testing.T, s string) {
		o, err := ParseMPIOutput(s)
		if err != nil {
			return
		}
		if len(o.Results) == 0 {
			t.Fatal("no results without an error")
		}
		for _, r := range o.Results {
			if r.Ranks < 0 || r.Size < 0 || r.Reps < 0 || r.TMin < 0 || r.TMax < 0 || r.TAvg < 0 {
				t.Fatalf("negative field accepted: %+v", r)
			}
		}
	})
}

// FuzzParseSchedstat: a parsed schedstat prints back to an equivalent line.
func FuzzParseSchedstat(f *testing.F) {
	f.Add("1 2 3\n")
	f.Add("18446744073709551615 0 7")
	f.Fuzz(func(t *testing.T, s string) {
		st, err := ParseSchedstat(s)
		if err != nil {
			return
		}
		back, err := ParseSchedstat(fmt.Sprintf("%d %d %d", st.OnCPUNs, st.WaitNs, st.Slices))
		if err != nil || back != st {
			t.Fatalf("round trip of %q: %+v, %v", s, back, err)
		}
	})
}

// FuzzParseFieldOffset: never panics; a found offset fits the declared type.
func FuzzParseFieldOffset(f *testing.F) {
	f.Add("\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n", "prev_pid")
	f.Add("field:;offset:", "")
	f.Fuzz(func(t *testing.T, format, field string) {
		_, _ = parseFieldOffset(format, field)
	})
}

// FuzzParseLateness: a parsed lateness line prints back to an equal
// result, and never has more missed deadlines than wake-ups.
func FuzzParseLateness(f *testing.F) {
	f.Add("lateness wakeups=100 missed=3 max_ns=2500000 fifo=1 gcs=7\n")
	f.Add("x\nlateness wakeups=1 missed=0 max_ns=0 fifo=0")
	f.Add("lateness wakeups=1 missed=2 max_ns= fifo=1")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseLateness(s)
		if err != nil {
			return
		}
		if r.Missed > r.Wakeups {
			t.Fatalf("%q: more missed than wake-ups accepted: %+v", s, r)
		}
		fifo := 0
		if r.FIFO {
			fifo = 1
		}
		back, err := ParseLateness(fmt.Sprintf("lateness wakeups=%d missed=%d max_ns=%d fifo=%d gcs=%d",
			r.Wakeups, r.Missed, int64(r.MaxLate), fifo, r.GCs))
		if err != nil || back != r {
			t.Fatalf("round trip of %q: %+v, %v", s, back, err)
		}
	})
}

// FuzzParseHBCost: a parsed C reference line prints back to an equal
// result, and never has more suspicions than checks.
func FuzzParseHBCost(f *testing.F) {
	f.Add("hbcost sent=2000 checks=200 received=1990 suspicions=0 missed=3 max_late_ns=2500000\n")
	f.Add("x\nhbcost sent=1 checks=1 received=0 suspicions=1 missed=0 max_late_ns=0")
	f.Add("hbcost sent=1 checks=0 received=0 suspicions=1 missed=0 max_late_ns=")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseHBCost(s)
		if err != nil {
			return
		}
		if r.Suspicions > r.Checks || r.MaxLate < 0 {
			t.Fatalf("%q: accepted %+v", s, r)
		}
		back, err := ParseHBCost(fmt.Sprintf("hbcost sent=%d checks=%d received=%d suspicions=%d missed=%d max_late_ns=%d",
			r.Sent, r.Checks, r.Received, r.Suspicions, r.Missed, int64(r.MaxLate)))
		if err != nil || back != r {
			t.Fatalf("round trip of %q: %+v, %v", s, back, err)
		}
	})
}

// FuzzParseCtxSwitches: parsed counts print back to an equivalent status
// file.
func FuzzParseCtxSwitches(f *testing.F) {
	f.Add("Name:\tvigil\nvoluntary_ctxt_switches:\t1234\nnonvoluntary_ctxt_switches:\t56\n")
	f.Add("voluntary_ctxt_switches: 18446744073709551615\nnonvoluntary_ctxt_switches:0")
	f.Add("voluntary_ctxt_switches:\nnonvoluntary_ctxt_switches:1")
	f.Fuzz(func(t *testing.T, s string) {
		v, i, err := ParseCtxSwitches(s)
		if err != nil {
			return
		}
		v2, i2, err := ParseCtxSwitches(fmt.Sprintf("nonvoluntary_ctxt_switches:\t%d\nvoluntary_ctxt_switches:\t%d\n", i, v))
		if err != nil || v2 != v || i2 != i {
			t.Fatalf("round trip of %q: %d, %d, %v", s, v2, i2, err)
		}
	})
}

// FuzzParseMachineCPU: never panics, and an accepted file gives
// non-negative times and at least one CPU, which print back to the same
// account.
func FuzzParseMachineCPU(f *testing.F) {
	f.Add("cpu  100 20 30 1000 7 2 1 5 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
	f.Add("cpu 0 0 0 68719476735 68719476735 0 0 68719476735\ncpu0 0\ncpu1 0\n")
	f.Add("cpu 1 2 3")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMachineCPU(s)
		if err != nil {
			return
		}
		if m.Idle < 0 || m.Steal < 0 || m.CPUs < 1 {
			t.Fatalf("%q: accepted %+v", s, m)
		}
		// The idle ticks spread over idle and iowait.
		tick := 10 * time.Millisecond
		idle := int64(m.Idle / tick)
		first := min(idle, 1<<36-1)
		text := fmt.Sprintf("cpu 0 0 0 %d %d 0 0 %d\n%s", first, idle-first, m.Steal/tick,
			strings.Repeat("cpu0 0\n", m.CPUs))
		back, err := ParseMachineCPU(text)
		if err != nil || back != m {
			t.Fatalf("round trip of %q: %+v, %v", s, back, err)
		}
	})
}
