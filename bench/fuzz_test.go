package bench

import (
	"fmt"
	"testing"
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
