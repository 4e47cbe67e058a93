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
