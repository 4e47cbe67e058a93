// Package daemon is Vigil's node-level mode (seed 003, the resilient PRRTE
// "RDaemon"): one daemon per node takes part in the observation ring and
// the propagation overlay, and monitors the application processes of its
// own node directly.
//
// Two kinds of failures are detected (seed 003 §4.2):
//   - a node failure, congruent with the failure of its daemon: the
//     daemons form seed 000's observation ring (hb.Ring, heartbeats every
//     h, suspicion after δ); the observer of a dead daemon reports the
//     daemon together with every process it hosted (Layout.Hosted);
//   - a process failure: the node's daemon sees a local process end at
//     once (waitid for the children it started, a pidfd for processes that
//     attached over its Unix socket), and catches hangs (a SIGSTOPped or
//     wedged process) from a heartbeat word the process bumps in shared
//     memory, or from the kernel's "stopped" state.
//
// Propagation is seed 003's two-level reliable broadcast (Algorithm 1,
// Propagation in report.go): a binomial graph (bcast.BMG) between daemons,
// then a star from each daemon to its attached local processes.
//
// Daemons are fail-stop: one declared dead that resumes (SIGSTOP, a long
// network cut) is told EVICTED, kills its children and stops, so that a
// node reported down with its processes stays down.
//
// Files: layout.go (who hosts which ranks), report.go (Algorithm 1, pure;
// Report, ProcFailure and Cause are aliases of internal/wire's, where the
// daemons' messages and their codec live: wire.DaemonNewObserver,
// wire.DaemonEvicted, wire.Report, wire.DecodeDaemon), event.go (what daemons
// and local processes are told), shm.go (the heartbeat words), local.go
// (operating-system side of local monitoring) and monitor.go (the loop's
// side), server.go and client.go (the local Unix socket), evict.go
// (fail-stop), config.go, daemon.go (the composition and its loop). PMIX.md maps the events to PMIx;
// RESULTS.md has the tests and the placement benchmark.
package daemon
