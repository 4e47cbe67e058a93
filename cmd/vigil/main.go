// Command vigil runs Vigil's failure detector and its tools.
//
//	vigil demo             the main demo: 16 ranks over TCP, kills, a timeline
//	vigil run -n N         launch N agents on this machine (the local launcher)
//	vigil agent            one detector process (started by run, or a launcher)
//
// Run `vigil <command> -help` for a command's flags.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "demo":
		err = demoMain(args)
	case "run":
		err = runMain(args)
	case "agent":
		err = agentMain(args)
	case "daemon":
		err = daemonMain(args)
	case "bench", "sim":
		// The benchmarks and the papers' simulations (and their plotting
		// dependencies) live in the bench module, out of this binary.
		sub := "quick|full|<part>"
		if cmd == "sim" {
			sub = "sim <stab|probe|bcast|era|tsweep|all>"
		}
		err = fmt.Errorf("%s moved to the bench module's command: vigil-bench %s [flags]\n"+
			"(make vigil-bench builds bin/vigil-bench; or: cd bench && go run ./cmd/vigil-bench ...)", cmd, sub)
	case "help", "-h", "-help", "--help":
		usage()
		return
	default:
		fmt.Fprintf(os.Stderr, "vigil: unknown command %q\n", cmd)
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vigil:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `usage: vigil <command> [flags]

commands:
  demo     16 ranks over TCP on this machine, SIGKILL injection, a timeline
           checked against the bound of seed 000's Theorem 1 (exit 0 = all good)
  run      launch N detector agents on this machine (-n N) and print events
  agent    one detector process, bootstrapped from its environment
  daemon   one node's daemon (node-level mode, seed 003), or -attach a local process

Benchmarks and the papers' simulations are in the bench module's own command:
vigil-bench quick|full|<part> and vigil-bench sim ... (make vigil-bench).
`)
}
