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
	case "bench":
		err = benchMain(args)
	case "sim":
		err = simMain(args)
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
  bench    benchmarks: vigil bench quick|full|<part> (CSV, PNG, SUMMARY.md)
  sim      simulations of the papers' results (stab, probe, bcast, era, all)
`)
}
