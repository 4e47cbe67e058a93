package main

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/vigil-hpc/vigil/lab/testnet"
)

// TestCPropagationConfig runs testdata/propcheck.c: every broadcast name
// runs a job, bad broadcast names and gossip values (vigil_config's fields
// and VIGIL_BROADCAST / VIGIL_GOSSIP_*) are refused naming the field or
// variable, and a caller built before the gossip fields keeps working.
func TestCPropagationConfig(t *testing.T) {
	bin := compileCFile(t, lib(t, ""), "testdata/propcheck.c", false)
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil || !strings.Contains(string(out), " 0 failures") {
		t.Fatalf("propcheck: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}

// TestCExplicitRefusesBadPropagation: explicit.c given a bad broadcast
// name or gossip value exits with status 1 (not a crash), its vigil_init
// refused with VIGIL_ERR_INVALID and a message naming the field.
func TestCExplicitRefusesBadPropagation(t *testing.T) {
	bin := compileC(t, lib(t, ""), "examples/explicit.c", false)
	addrs := testnet.FreeAddrs(t, 2)
	for _, c := range []struct {
		opts  []string
		field string
	}{
		{[]string{"-b", "flood"}, `vigil_config.broadcast = "flood", want one of hba, bmg, ocg, ccg, fcg, ctree`},
		{[]string{"-b", "ctree", "-F", "4"}, "vigil_config.gossip_f = 4: want 1 to 3"},
		{[]string{"-b", "ocg", "-o", "-100"}, "vigil_config.gossip_step_ns = -100 (-100ns): want > 0"},
		{[]string{"-b", "ccg", "-T", "-1"}, "vigil_config.gossip_t = -1: want 0 (planned) to 1048576"},
	} {
		args := append(append(slices.Clone(c.opts), "ring", "0", "20", "1000", explicitJob, "00112233445566778899aabbccddeeff"), addrs...)
		out, err := exec.Command(bin, args...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("explicit %v: %v, want exit status 1\n%s", c.opts, err, out)
		}
		if !strings.Contains(string(out), "vigil_init: invalid argument or configuration (-1)") ||
			!strings.Contains(string(out), c.field) {
			t.Errorf("explicit %v: want VIGIL_ERR_INVALID naming %q, got:\n%s", c.opts, c.field, out)
		}
	}
}

// TestCExplicitRingCorrectedTree: five ranks configured with broadcast
// "ctree" (and F = 2); one is killed, and every survivor reports it and
// nothing else.
func TestCExplicitRingCorrectedTree(t *testing.T) {
	bin := compileC(t, lib(t, ""), "examples/explicit.c", false)
	startExplicit(t, bin, "ring", 5, 20, 1000, "-b", "ctree", "-F", "2").killAndExpect(2)
}

// TestCExplicitRingCCG: the same with the checked corrected gossip, "ccg",
// with an explicit step and latency.
func TestCExplicitRingCCG(t *testing.T) {
	bin := compileC(t, lib(t, ""), "examples/explicit.c", false)
	startExplicit(t, bin, "ring", 5, 20, 1000, "-b", "ccg", "-o", "200000", "-L", "1000000").killAndExpect(4)
}

// TestCPropagationEnv: vigil_init_from_env refuses bad VIGIL_BROADCAST and
// VIGIL_GOSSIP_* values with VIGIL_ERR_INVALID and a message naming the
// variable, before looking for a launcher; good ones get as far as that
// (VIGIL_ERR_BOOTSTRAP: no launcher).
func TestCPropagationEnv(t *testing.T) {
	bin := compileCFile(t, lib(t, ""), "testdata/propcheck.c", false)
	var clean []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VIGIL_") && !strings.HasPrefix(kv, "PMIX_") {
			clean = append(clean, kv)
		}
	}
	good := []string{"VIGIL_BROADCAST=ctree", "VIGIL_GOSSIP_STEP=200us", "VIGIL_GOSSIP_LATENCY=1ms",
		"VIGIL_GOSSIP_T=20", "VIGIL_GOSSIP_C=2", "VIGIL_GOSSIP_F=3"}
	for _, c := range []struct {
		env  []string // after good's
		want string
	}{
		{nil, "rc=-3 vigil: no launcher"},
		{[]string{"VIGIL_BROADCAST=fcg"}, "rc=-3 vigil: no launcher"},
		{[]string{"VIGIL_BROADCAST=flood"}, `rc=-1 vigil: VIGIL_BROADCAST = "flood", want one of hba, bmg, ocg, ccg, fcg, ctree`},
		{[]string{"VIGIL_BROADCAST=Ctree"}, `rc=-1 vigil: VIGIL_BROADCAST = "Ctree"`},
		{[]string{"VIGIL_GOSSIP_STEP=100"}, `rc=-1 vigil: VIGIL_GOSSIP_STEP="100" is not a duration`},
		{[]string{"VIGIL_GOSSIP_STEP=-1us"}, `rc=-1 vigil: VIGIL_GOSSIP_STEP="-1us" is not a duration`},
		{[]string{"VIGIL_GOSSIP_LATENCY=soon"}, `rc=-1 vigil: VIGIL_GOSSIP_LATENCY="soon" is not a duration`},
		{[]string{"VIGIL_GOSSIP_STEP=1ns", "VIGIL_GOSSIP_LATENCY=1s"}, "rc=-1 vigil: VIGIL_GOSSIP_LATENCY=1s: want at most 65536 steps of VIGIL_GOSSIP_STEP"},
		{[]string{"VIGIL_GOSSIP_T=x"}, `rc=-1 vigil: VIGIL_GOSSIP_T="x" is not an integer`},
		{[]string{"VIGIL_GOSSIP_T=-2"}, "rc=-1 vigil: VIGIL_GOSSIP_T=-2: want 0 (planned) to 1048576"},
		{[]string{"VIGIL_GOSSIP_T=99999999"}, "rc=-1 vigil: VIGIL_GOSSIP_T=99999999: want 0 (planned) to 1048576"},
		{[]string{"VIGIL_GOSSIP_C=-1"}, "rc=-1 vigil: VIGIL_GOSSIP_C=-1: want 0 (planned) to 1048576"},
		{[]string{"VIGIL_GOSSIP_F=9"}, "rc=-1 vigil: VIGIL_GOSSIP_F=9: want 1 to 3 (0: 1)"},
		{[]string{"VIGIL_GOSSIP_F=1.5"}, `rc=-1 vigil: VIGIL_GOSSIP_F="1.5" is not an integer`},
		{[]string{"VIGIL_BROADCAST=", "VIGIL_GOSSIP_F=4"}, "rc=-1 vigil: VIGIL_GOSSIP_F=4: want 1 to 3"}, // hba refuses it too
	} {
		cmd := exec.Command(bin, "env")
		cmd.Env = append(append(slices.Clone(clean), good...), c.env...)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), c.want) {
			t.Errorf("%v: %v: got %q, want it to start with %q", c.env, err, out, c.want)
		}
	}
}
