package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/lab/testnet"
)

// agreeLine is a line printed by csrc/tests/agree.c.
type agreeLine struct {
	Ev        string   `json:"ev"`
	Rank      uint32   `json:"rank"`
	Seq       uint64   `json:"seq"`
	Value     uint64   `json:"value"`
	Unacked   int      `json:"unacked"`
	DeadSet   []uint32 `json:"dead_set"`
	Survivors []uint32 `json:"survivors"`
	What      string   `json:"what"`
	Rc        int      `json:"rc"`
}

// TestCAgree runs csrc/tests/agree.c as 4 processes: agreements without
// failure, then rank 0 (the root of the agreement tree) kills itself and
// the survivors agree again and shrink. Every survivor must print the same
// results: values, agreement numbers, dead sets, the unacknowledged flag
// raised once, and the shrunk group.
func TestCAgree(t *testing.T) {
	bin := compileC(t, lib(t, ""), "tests/agree.c", false)
	const n, victim = 4, 0
	addrs := testnet.FreeAddrs(t, n)
	lines := make(chan agreeLine, 256)
	done := make(chan struct{}, n)
	var cmds []*exec.Cmd
	for r := range n {
		args := append([]string{fmt.Sprint(r), "20", "200", "a9ee", "00112233445566778899aabbccddeeff", fmt.Sprint(victim)}, addrs...)
		cmd := exec.Command(bin, args...)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var l agreeLine
				if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
					t.Errorf("rank %d printed %q: %v", r, sc.Text(), err)
					continue
				}
				lines <- l
			}
			cmd.Wait()
			done <- struct{}{}
		}()
	}
	t.Cleanup(func() {
		for _, c := range cmds {
			c.Process.Kill()
		}
	})
	var got []agreeLine
	deadline := time.After(60 * time.Second)
	for exited := 0; exited < n; {
		select {
		case l := <-lines:
			got = append(got, l)
		case <-done:
			exited++
		case <-deadline:
			t.Fatalf("timed out; lines so far: %+v", got)
		}
	}
	for len(lines) > 0 {
		got = append(got, <-lines)
	}
	type want struct {
		ev      string
		seq     uint64
		value   uint64
		unacked int
		dead    []uint32
	}
	band := uint64(0xff) | uint64(0xff&^0x0f)<<8 | 0x0f<<16
	phase1 := []want{{"agree1", 1, 15, 0, nil}, {"agree1", 2, 15, 0, nil}, {"agree1", 3, 15, 0, nil},
		{"agree1", 4, 15, 0, nil}, {"agree1", 5, 15, 0, nil}, {"max", 6, 3000, 0, nil}, {"band", 7, band, 0, nil}}
	phase2 := []want{{"agree2", 8, 14, 1, []uint32{victim}}, {"agree2", 9, 14, 0, []uint32{victim}}, {"agree2", 10, 14, 0, []uint32{victim}}}
	// The victim, the tree's root, is killed as soon as agreement 7
	// returns on it (ERA's early return): its DOWN messages may die with
	// it. The survivors then decide 7 among themselves (ERA is
	// non-uniform): without the victim's contribution, with it dead and
	// flagged, and agreement 8 no longer flags it. Either outcome must be
	// the same at every survivor (checked below line by line).
	survivorBand := want{"band", 7, band | uint64(1<<victim)<<8, 1, []uint32{victim}}
	for _, l := range got {
		if l.Rank != victim && l.Ev == "band" && len(l.DeadSet) > 0 {
			t.Logf("the root's decision of agreement 7 died with it: the survivors decided it without the root")
			phase2[0].unacked = 0
			break
		}
	}
	for r := range uint32(n) {
		var mine []agreeLine
		for _, l := range got {
			if l.Rank == r {
				mine = append(mine, l)
			}
			if l.Ev == "fail" {
				t.Fatalf("rank %d failed: %s returned %d", l.Rank, l.What, l.Rc)
			}
		}
		exp := phase1
		if r != victim {
			exp = append(slices.Clone(phase1), phase2...)
			if phase2[0].unacked == 0 {
				exp[6] = survivorBand
			}
		}
		var agreed []agreeLine
		var shrink, bye int
		for _, l := range mine {
			switch l.Ev {
			case "agree1", "agree2", "max", "band":
				agreed = append(agreed, l)
			case "shrink":
				shrink++
				if !slices.Equal(l.Survivors, []uint32{1, 2, 3}) {
					t.Errorf("rank %d: shrink = %v, want [1 2 3]", r, l.Survivors)
				}
			case "bye":
				bye++
			}
		}
		if len(agreed) != len(exp) {
			t.Fatalf("rank %d printed %d agreements, want %d: %+v", r, len(agreed), len(exp), mine)
		}
		for i, w := range exp {
			l := agreed[i]
			if l.Ev != w.ev || l.Seq != w.seq || l.Value != w.value || l.Unacked != w.unacked || !slices.Equal(l.DeadSet, w.dead) && len(l.DeadSet)+len(w.dead) > 0 {
				t.Errorf("rank %d: %+v, want %+v", r, l, w)
			}
		}
		if r != victim && (shrink != 1 || bye != 1) {
			t.Errorf("rank %d: %d shrink lines and %d bye lines", r, shrink, bye)
		}
	}
	t.Logf("%d lines checked: 7 agreements at 4 ranks, then 3 agreements and a shrink at 3 survivors of the root's crash", len(got))
}
