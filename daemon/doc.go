// Package daemon is Vigil's node-level mode (seed 003, the resilient PRRTE
// "RDaemon"): one daemon per node takes part in the observation ring and
// the propagation overlay, and monitors the application processes of its
// own node directly.
//
// The daemons run the same detector as ranks do: a node.Node per daemon,
// one rank per node, driving detector.Core (observation ring with block
// mending, dead-list repair, fail-stop eviction) with the binomial graph
// (bcast.BMG) as overlay by default, or another propagation of
// node.Broadcasts (Config.Broadcast and Config.Gossip: the double
// hypercube, a corrected gossip of seed 002 or the corrected tree), over
// any transport.Transport (TCP by default, Config.Transport for verbs).
// The daemon adds what is its own:
//
//   - a node failure, congruent with the failure of its daemon: the daemon
//     found dead by the ring is reported together with every process it
//     hosted (Layout.Hosted), which each daemon expands from the layout;
//   - a process failure: the node's daemon sees a local process end at
//     once (waitid for the children it started, a pidfd for processes that
//     attached over its Unix socket), and catches hangs (a SIGSTOPped or
//     wedged process) from a heartbeat word the process bumps in shared
//     memory, or from the kernel's "stopped" state; it publishes a Report
//     to the other daemons as a note (node.Node.Publish), which travels
//     the same overlay as a failure.
//
// Propagation is seed 003's two-level reliable broadcast: the detector's
// broadcast between daemons, then a star from each daemon to its attached
// local processes (Reported in report.go is Reported_i).
//
// Daemons are fail-stop: one declared dead that resumes (SIGSTOP, a long
// network cut) is told EVICTED by the detector, kills its children and
// stops, so that a node reported down with its processes stays down.
//
// Files: layout.go (who hosts which ranks), report.go (Reported, pure;
// Report, ProcFailure and Cause are aliases of internal/wire's, where the
// report's codec lives: wire.AppendReport, wire.DecodeReport), event.go
// (what daemons and local processes are told), shm.go (the heartbeat
// words), local.go (operating-system side of local monitoring) and
// monitor.go (the loop's side), server.go and client.go (the local Unix
// socket), config.go, daemon.go (the composition and its loop). PMIX.md
// maps the events to PMIx; RESULTS.md has the tests and the placement
// benchmark.
package daemon
