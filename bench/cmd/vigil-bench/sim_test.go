package main

import (
	"bytes"
	"encoding/csv"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSimQuick runs `vigil-bench sim all -quick` in process and checks that every
// CSV and PNG file is written and that the values agree with closed forms
// and the papers' bounds; the host-crash study's rows are checked in a
// subtest (one run of the study serves both).
func TestSimQuick(t *testing.T) {
	dir := t.TempDir()
	if err := simMain([]string{"all", "-quick", "-q", "-out", dir}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"stab_lownoise.png", "stab_lowlat.png", "probe_rounds.png", "probe_L.png", "era_steps.png",
		"era_logp.png", "bcast_256_none.png", "bcast_256_expected.png", "bcast_scaling_none.png", "bcast_scaling_n64.png",
		"tsweep_latency.png", "tsweep_work.png", "hostcrash.png"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s: not a PNG file (%v)", f, err)
		}
	}

	// Broadcast study at N = 256, L = 2, o = g = 1 (µs): the binomial tree
	// takes ⌈log2 N⌉(2o+L) with N−1 messages, BIG delivers as the tree and
	// completes o log2 N later with N log2 N messages (seed 002 §IV.B.3),
	// BFB's failure-free model is (2o+L) log2 N; the corrected algorithms
	// are consistent.
	for _, r := range readCSV(t, dir, "bcast_256.csv") {
		alg, sc := r["alg"], r["scenario"]
		lat, work, deliv := num(t, r, "latency_us"), num(t, r, "work_msgs"), num(t, r, "last_delivery_us")
		inc := num(t, r, "inconsistent_runs")
		if sc == "none" {
			switch alg {
			case "OPT":
				if lat != 32 || work != 255 {
					t.Errorf("OPT: latency %v work %v, want 32 µs and 255", lat, work)
				}
			case "BIG":
				if deliv != 32 || lat != 40 || work != 256*8 {
					t.Errorf("BIG: delivery %v completion %v work %v, want 32, 40, 2048", deliv, lat, work)
				}
			case "BFB":
				if lat != 32 {
					t.Errorf("BFB: latency %v, want 32", lat)
				}
			case "HBA", "BMG":
				// Seed 000 §3.1.2's bound B = 8 t log2 n with t = 2o+L.
				if inc != 0 || deliv <= 0 || deliv > 8*4*8 {
					t.Errorf("%s: delivery %v (bound 256), %v inconsistent runs", alg, deliv, inc)
				}
			}
		}
		switch alg {
		case "FCG", "CTF", "CBF":
			if inc != 0 {
				t.Errorf("%s %s: %v inconsistent runs", alg, sc, inc)
			}
		case "CCG", "BIG", "HBA", "BMG":
			if sc != "expected-online" && inc != 0 {
				t.Errorf("%s %s: %v inconsistent runs", alg, sc, inc)
			}
		}
		if work <= 0 || lat <= 0 || math.IsNaN(lat) {
			t.Errorf("%s %s: latency %v work %v", alg, sc, lat, work)
		}
	}
	for _, r := range readCSV(t, dir, "bcast_scaling.csv") {
		n := int(num(t, r, "n"))
		if r["alg"] == "OPT" && r["scenario"] == "none" {
			if want := float64(4 * bits.Len(uint(n-1))); num(t, r, "latency_us") != want {
				t.Errorf("OPT n=%d: latency %v, want ⌈log2 n⌉·4 = %v", n, num(t, r, "latency_us"), want)
			}
		}
	}

	// ERA (seed 001 Theorem 5): without failures the binary tree decides in
	// exactly 2 × depth parallel steps, the star in 2; every run decides.
	for _, r := range readCSV(t, dir, "era.csv") {
		if num(t, r, "undecided") != 0 || num(t, r, "disagreed") != 0 {
			t.Errorf("era %v: undecided or disagreeing processes", r)
		}
		if r["net"] != "steps" || r["failures"] != "0" {
			continue
		}
		d := num(t, r, "decided")
		if d != num(t, r, "two_depth") {
			t.Errorf("era %s n=%s: %v steps, want 2 × depth = %v", r["tree"], r["n"], d, num(t, r, "two_depth"))
		}
		switch r["tree"] {
		case "bin", "4ary", "star":
			if d != num(t, r, "thm5_2log_delta") {
				t.Errorf("era %s n=%s: %v steps, want 2 log_δ n = %v", r["tree"], r["n"], d, num(t, r, "thm5_2log_delta"))
			}
		}
	}

	// Random probing: L(N) within the balls-and-bins bounds, at least
	// log(N)/log(1/p) rounds on average.
	for _, r := range readCSV(t, dir, "probe.csv") {
		n := num(t, r, "n")
		l, lo, hi := num(t, r, "mean_L"), num(t, r, "bound_lo"), num(t, r, "bound_hi")
		if n >= 100 && (l < lo || l > hi) {
			t.Errorf("probe N=%v: mean L %v outside [%v, %v]", n, l, lo, hi)
		}
		if mr := num(t, r, "mean_rounds"); mr < math.Log(n) || mr > 3*math.Log(n)+5 {
			t.Errorf("probe N=%v: %v rounds on average", n, mr)
		}
	}

	// Detector: every run stabilizes; the first failure is known about
	// δ − h/2 after it on average (seed 000 §4.2), never before δ − h.
	for _, r := range readCSV(t, dir, "stab.csv") {
		delta, h := 60.0, 10.0
		if r["scenario"] == "LOWLAT" {
			delta, h = 1, 0.1
		}
		fk, st := num(t, r, "first_known_s"), num(t, r, "stabilized_s")
		if num(t, r, "unstable") != 0 || fk < delta-h || st < fk || num(t, r, "failures") < 1 {
			t.Errorf("stab %v: first known %v s, stable %v s (δ = %v s)", r, fk, st, delta)
		}
	}
	t.Run("hostcrash", func(t *testing.T) { checkSimHostCrash(t, dir) })
	t.Run("burst", func(t *testing.T) { checkSimBurst(t, dir) })
}

// checkSimBurst checks the output of `vigil-bench sim burst -quick` (also
// written by `sim all -quick`) in dir: at n = 256 every burst, random
// ranks, whole hosts and a cut seen from either side, loses exactly the
// ranks it takes out, with no live rank suspected, every survivor knowing
// within 2δ + a probe round's δ of the burst (cut, minority: the doubling
// rounds over the other side, 5δ).
func checkSimBurst(t *testing.T, dir string) {
	md, err := os.ReadFile(filepath.Join(dir, "burst.md"))
	if err != nil || !bytes.Contains(md, []byte("| 256 | cut, minority | 25 % | 2 |")) {
		t.Errorf("burst.md: %v\n%s", err, md)
	}
	rows := readCSV(t, dir, "burst.csv")
	if len(rows) != 16 {
		t.Fatalf("burst.csv: %d rows, want 4 bursts × 4 fractions", len(rows))
	}
	for _, r := range rows {
		bound := 0.15
		if r["plan"] == "cut, minority" {
			bound = 0.25
		}
		if num(t, r, "lost_max") != num(t, r, "killed") || num(t, r, "false_suspicions") != 0 || num(t, r, "incomplete") != 0 ||
			num(t, r, "all_known_max_s") > bound || num(t, r, "msgs_per_survivor") <= 0 {
			t.Errorf("burst %v: lost beyond the burst, a false suspicion, or all know after %v s > %v s", r, num(t, r, "all_known_max_s"), bound)
		}
	}
}

// checkSimHostCrash checks the output of `vigil-bench sim hostcrash -quick`
// (also written by `sim all -quick`) in dir: every row complete with no
// live rank reported, block mending within hb.BlockBound in every run,
// faster than Algorithm 1 on the same crashes, and the only one to send
// PROBE/ALIVE.
func checkSimHostCrash(t *testing.T, dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "hostcrash.png"))
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("hostcrash.png: not a PNG file (%v)", err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "hostcrash.md"))
	if err != nil || !bytes.Contains(md, []byte("| LOWLAT | 512 | 4 × 64 | block, W = 64 |")) {
		t.Errorf("hostcrash.md: %v\n%s", err, md)
	}
	rows := readCSV(t, dir, "hostcrash.csv")
	alg1 := map[string]float64{}
	key := func(r map[string]string) string { return r["scenario"] + "/" + r["host_size"] + "/" + r["hosts"] }
	w16 := map[string]float64{} // W = 16 without host labels
	for _, r := range rows {
		switch {
		case r["probe"] == "0":
			alg1[key(r)] = num(t, r, "all_known_s")
		case r["probe"] == "16" && r["host_labels"] != "true":
			w16[key(r)] = num(t, r, "all_known_s")
		}
	}
	// 2 scenarios × hosts of 16 (Algorithm 1, W = 16, W = 16 with host
	// labels) and of 64 (the same and W = 64) × 1 or 4 hosts.
	if len(rows) != 28 || len(alg1) != 8 {
		t.Fatalf("%d rows, %d of them Algorithm 1", len(rows), len(alg1))
	}
	for _, r := range rows {
		runs := num(t, r, "runs")
		if num(t, r, "incomplete") != 0 || num(t, r, "unstable") != 0 || num(t, r, "false_suspicions") != 0 || num(t, r, "evicted") != 0 {
			t.Errorf("%v: incomplete, unstable or false reports", r)
		}
		if num(t, r, "failures") != num(t, r, "host_size")*num(t, r, "hosts") {
			t.Errorf("%v: wrong number of failures", r)
		}
		known, probes := num(t, r, "all_known_s"), num(t, r, "probe_msgs")
		if r["probe"] == "0" {
			if probes != 0 {
				t.Errorf("%v: Algorithm 1 probed", r)
			}
			continue
		}
		if num(t, r, "within_bound") != runs || known > num(t, r, "block_bound_s") || probes == 0 {
			t.Errorf("%v: beyond hb.BlockBound or no probes", r)
		}
		if a := alg1[key(r)]; known*4 > a {
			t.Errorf("%v: all know after %v s, Algorithm 1 after %v s", r, known, a)
		}
		if r["host_labels"] == "true" && r["probe"] == "16" {
			if u := w16[key(r)]; known > u {
				t.Errorf("%v: with host labels all know after %v s, without after %v s", r, known, u)
			}
		}
	}
}

// TestSimBadInput: clear errors, no crash.
func TestSimBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{}, {"nope"}, {"era", "-workers", "0"}, {"probe", "extra"}, {"-quick"}, {"bcast", "-algs", "NOPE"}, {"stab", "-plans", "x"}, {"burst", "-quick", "-bursts", "random,nope"}} {
		if err := simMain(append(args, "-out", dir)); err == nil {
			t.Errorf("sim %q: no error", args)
		}
	}
}

func readCSV(t *testing.T, dir, name string) []map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) < 2 {
		t.Fatalf("%s: %v (%d records)", name, err, len(recs))
	}
	var out []map[string]string
	for _, rec := range recs[1:] {
		m := map[string]string{}
		for i, h := range recs[0] {
			m[h] = rec[i]
		}
		out = append(out, m)
	}
	return out
}

func num(t *testing.T, r map[string]string, k string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(r[k], 64)
	if err != nil {
		t.Fatalf("column %s: %v", k, err)
	}
	return v
}

// TestBarOffTerminal: off a terminal the progress bar prints one line per
// tenth, without carriage returns, and a last line at 100 %.
func TestBarOffTerminal(t *testing.T) {
	var buf strings.Builder
	b := newBar(&simOpts{stderr: &buf}, "stab", 100)
	for range 100 {
		b.add(1)
	}
	b.finish()
	out := buf.String()
	if strings.Contains(out, "\r") {
		t.Fatalf("carriage return in %q", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 10 || !strings.Contains(lines[9], "100%") || !strings.Contains(lines[0], " 10%") {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
}
