// Command vigil runs Vigil's failure detector and its tools.
//
//	vigil demo             the main demo: 16 ranks over TCP, kills, a timeline
//	vigil run -n N         launch N agents on this machine (the local launcher)
//	vigil run -n N -- P    launch N copies of program P, each a rank of one job
//	vigil agent            one detector process (started by run, or a launcher)
//
// Run `vigil <command> -help` (or a bare -h) for a command's flags, and
// `vigil -version` for the build.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	cmd, args := os.Args[1], os.Args[2:]
	if wantsHelp(args) {
		args = []string{"-help"} // the command's flag set prints its usage
	}
	switch cmd {
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
		err = usageErrorf("%s moved to the bench module's command: vigil-bench %s [flags]\n"+
			"(make vigil-bench builds bin/vigil-bench; or: cd bench && go run ./cmd/vigil-bench ...)", cmd, sub)
	case "help", "-h", "-help", "--help":
		usage()
		return
	case "version", "-version", "--version":
		fmt.Println(version())
		return
	case "keygen":
		err = keygen(os.Stdout)
	default:
		fmt.Fprintf(os.Stderr, "vigil: unknown command %q\n", cmd)
		usage()
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return // usage asked for and printed
	}
	if ee := (exitError{}); errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(os.Stderr, ee.msg)
		}
		os.Exit(ee.code)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vigil:", err)
		if errors.As(err, new(usageError)) {
			os.Exit(2) // a bad invocation, as the flag package's own exit
		}
		var st exitStatus
		if errors.As(err, &st) {
			os.Exit(st.code)
		}
		os.Exit(1)
	}
}

// ExitMinority is vigil agent's (and vigil daemon's) exit status when it
// stopped on the minority side of a partition (node.Node.Minority,
// docs/partitions.md).
const ExitMinority = 3

// exitStatus is an error that exits with a status of its own.
type exitStatus struct {
	code int
	err  error
}

func (e exitStatus) Error() string { return e.err.Error() }
func (e exitStatus) Unwrap() error { return e.err }

// keygen prints a new job key: 32 random bytes, in hex.
func keygen(w io.Writer) error {
	var k [32]byte
	if _, err := rand.Read(k[:]); err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	_, err := fmt.Fprintln(w, hex.EncodeToString(k[:]))
	return err
}

// wantsHelp reports whether a command's arguments ask for its usage:
// -help or --help anywhere, or -h (which is also the heartbeat period)
// with no value after it.
func wantsHelp(args []string) bool {
	for i, a := range args {
		switch {
		case a == "--":
			return false
		case a == "-help" || a == "--help":
			return true
		case (a == "-h" || a == "--h") && i == len(args)-1:
			return true
		}
	}
	return false
}

// version describes this build: module version, VCS revision and time, Go.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "vigil (no build information)"
	}
	v := "vigil " + bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v += " " + s.Value[:min(12, len(s.Value))]
		case "vcs.time":
			v += " " + s.Value
		case "vcs.modified":
			if s.Value == "true" {
				v += " (modified)"
			}
		}
	}
	return v + " " + bi.GoVersion
}

func usage() {
	fmt.Fprint(os.Stderr, `usage: vigil <command> [flags]

commands:
  demo     16 ranks over TCP on this machine, SIGKILL injection, a timeline
           checked against the bound of seed 000's Theorem 1 (exit 0 = all good)
  run      launch N detector agents on this machine (-n N) and print events,
           or N copies of a program: vigil run -n N -- PROGRAM [ARGS...]
  agent    one detector process, bootstrapped from its environment
  daemon   one node's daemon (node-level mode, seed 003), or -attach a local process
  keygen   print a new random job key (hex), e.g. for $VIGIL_DAEMON_KEY
  version  this build (also -version)

vigil <command> -help (or a bare -h) lists a command's flags.

Benchmarks and the papers' simulations are in the bench module's own command:
vigil-bench quick|full|<part> and vigil-bench sim ... (make vigil-bench).
`)
}
