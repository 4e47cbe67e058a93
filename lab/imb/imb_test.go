package imb

import (
	"testing"
	"time"
)

func TestIMBRepsRule(t *testing.T) {
	for _, c := range []struct{ size, cap, want int }{
		{0, 0, 1000}, {1, 0, 1000}, {40 << 10, 0, 1000}, {64 << 10, 0, 640}, {4 << 20, 0, 10},
		{0, 50, 50}, {8 << 20, 0, 5}, {1 << 30, 0, 1},
	} {
		if got := IMBReps(c.size, c.cap); got != c.want {
			t.Errorf("IMBReps(%d, %d) = %d, want %d", c.size, c.cap, got, c.want)
		}
	}
	s := IMBSizes(4 << 20)
	if len(s) != 24 || s[0] != 0 || s[1] != 1 || s[23] != 4<<20 {
		t.Errorf("IMBSizes(4 MiB) = %v", s)
	}
}

func TestParseLoad(t *testing.T) {
	for _, l := range Loads {
		if got, err := ParseLoad(string(l)); err != nil || got != l {
			t.Errorf("ParseLoad(%q) = %q, %v", l, got, err)
		}
	}
	if _, err := ParseLoad("pingpong"); err == nil {
		t.Error("ParseLoad accepted a misspelt name")
	}
}

// TestIMBOverTCP runs every load on 3 ranks over the real TCP transport
// and checks the harness: one result per size, sane reduced times, and
// collectives that compute the right values.
func TestIMBOverTCP(t *testing.T) {
	g, err := NewTCPGroup(3)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	opt := RunOptions{Sizes: []int{0, 4, 1024}, MaxReps: 20, TimeLimit: time.Second}
	for _, l := range Loads {
		res, err := g.Run(l, opt)
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		want := 3
		if !l.Sized() {
			want = 1
		}
		if len(res) != want {
			t.Fatalf("%s: %d results, want %d", l, len(res), want)
		}
		for _, r := range res {
			if r.TMin <= 0 || r.TMin > r.TAvg || r.TAvg > r.TMax || r.Reps < 1 || r.Reps > 20 || r.Ranks != 3 {
				t.Errorf("%s size %d: bad result %+v", l, r.Size, r)
			}
		}
	}
}

// TestCollectivesCompute checks the broadcast and reduction results, not
// only that they finish.
func TestCollectivesCompute(t *testing.T) {
	const n = 5
	g, err := NewTCPGroup(n)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	errc := make(chan error, n)
	sums := make([][]float32, n)
	bcs := make([][]byte, n)
	for r := range n {
		go func() {
			c := g.Comm(r)
			v := []float32{float32(r), 1}
			if err := allreduceSum(c, v); err != nil {
				errc <- err
				return
			}
			sums[r] = v
			b := []byte{0, 0}
			if r == 3 {
				b = []byte{7, 9}
			}
			err := bcastBytes(c, 3, b)
			bcs[r] = b
			if err == nil {
				err = barrier(c)
			}
			errc <- err
		}()
	}
	for range n {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	for r := range n {
		if sums[r][0] != 10 || sums[r][1] != n {
			t.Errorf("rank %d: allreduce = %v, want [10 %d]", r, sums[r], n)
		}
		if bcs[r][0] != 7 || bcs[r][1] != 9 {
			t.Errorf("rank %d: bcast = %v, want [7 9]", r, bcs[r])
		}
	}
}
