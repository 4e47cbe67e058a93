package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/lab/testnet"
)

const daemonTestKey = "VIGIL_DAEMON_KEY=00112233445566778899aabbccddeeff"

// TestDaemonPropagationFlagsRefused: `vigil daemon` refuses a bad
// -broadcast or -gossip-* value, naming the flag, before starting.
func TestDaemonPropagationFlagsRefused(t *testing.T) {
	peers := strings.Join(testnet.FreeAddrs(t, 2), ",")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-broadcast", "flood"}, `daemon: -broadcast "flood": want one of hba, bmg, ocg, ccg, fcg, ctree`},
		{[]string{"-broadcast", "fcg", "-gossip-f", "4"}, "daemon: -gossip-f 4: want 1 to 3"},
		{[]string{"-broadcast", "ctree", "-gossip-step", "-1ms"}, "daemon: -gossip-step -1ms: want > 0"},
		{[]string{"-broadcast", "ocg", "-gossip-c", "-1"}, "daemon: -gossip-c -1: want 0 (planned) to 1048576"},
		{[]string{"-broadcast", "ccg", "-gossip-t", "9999999"}, "daemon: -gossip-t 9999999: want 0 (planned) to 1048576"},
		{[]string{"-gossip-latency", "ten"}, "-gossip-latency: want a duration with a unit"},
		{[]string{"-gossip-step", "1ns", "-gossip-latency", "1s"}, "daemon: -gossip-latency 1s: want at most 65536 steps of -gossip-step"},
	} {
		cmd := exec.Command(vigilBin, append([]string{"daemon", "-peers", peers}, tc.args...)...)
		cmd.Env = append(os.Environ(), daemonTestKey)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("vigil daemon %v: err %v, output %q; want a failure mentioning %q", tc.args, err, out, tc.want)
		}
	}
}

// TestDaemonCorrectedTreeCLI: four `vigil daemon -broadcast ctree` processes
// (-gossip-f 2), one spawned process each; daemon 2 is SIGKILLed, and each
// other daemon prints node 2 and its process exactly once, and nothing else.
func TestDaemonCorrectedTreeCLI(t *testing.T) {
	const n, victim = 4, 2
	peers := strings.Join(testnet.FreeAddrs(t, n), ",")
	type line struct {
		daemonLine
		from int
	}
	lines := make(chan line, 256)
	var cmds []*exec.Cmd
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		cmd := exec.Command(vigilBin, "daemon", "-node", fmt.Sprint(i), "-peers", peers, "-ppn", "1",
			"-h", "20ms", "-delta", "1s", "-broadcast", "ctree", "-gossip-f", "2", "--", "sleep", "600")
		cmd.Env = append(os.Environ(), daemonTestKey)
		out := startPiped(t, cmd)
		cmds = append(cmds, cmd)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var l line
				if err := json.Unmarshal(sc.Bytes(), &l.daemonLine); err != nil {
					t.Errorf("daemon %d printed %q: %v", i, sc.Text(), err)
					continue
				}
				l.from = i
				lines <- l
			}
			cmd.Wait()
		}()
	}
	t.Cleanup(func() {
		for _, c := range cmds {
			c.Process.Signal(syscall.SIGTERM)
		}
		wg.Wait()
	})
	deadline := time.After(30 * time.Second)
	next := func(what string) line {
		t.Helper()
		select {
		case l := <-lines:
			return l
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
		panic("unreachable")
	}
	for ready := 0; ready < n; {
		switch l := next("the ready lines"); l.Kind {
		case "ready":
			ready++
		default:
			t.Errorf("before any failure: daemon %d: %+v", l.from, l)
		}
	}
	time.Sleep(300 * time.Millisecond)
	cmds[victim].Process.Signal(syscall.SIGKILL)
	want := map[string]bool{}
	for i := 0; i < n; i++ {
		if i != victim {
			want[fmt.Sprintf("%d: node %d", i, victim)] = false
			want[fmt.Sprintf("%d: proc %d node_down", i, victim)] = false
		}
	}
	for left := len(want); left > 0; left-- {
		l := next(fmt.Sprintf("the survivors' reports (have %v)", want))
		k := fmt.Sprintf("%d: node %d", l.from, l.Node)
		if l.Kind == "proc" {
			k = fmt.Sprintf("%d: proc %d %s", l.from, l.Rank, l.Cause)
		}
		if done, ok := want[k]; !ok || done {
			t.Fatalf("unexpected line %s: %+v", k, l)
		}
		want[k] = true
	}
	select {
	case l := <-lines:
		t.Errorf("extra line from daemon %d: %+v", l.from, l)
	case <-time.After(time.Second):
	}
}
