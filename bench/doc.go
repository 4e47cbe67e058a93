// Package bench measures Vigil's cost and accuracy: IMB-style communication
// loads (over Vigil's TCP transport in Go, and as C programs against real
// MPI in csrc/bench), CPU-noise probes (FTQ, FWQ, selfish detour), the noise
// sweep of seed 003's method (overhead on the maximum latency against the
// natural-variability band), the accuracy sweep of seed 000 §5.3 (smallest
// safe heartbeat period under load), eBPF scheduling attribution, and a
// head-to-head against hashicorp/memberlist.
//
// Nothing here is imported by the library: the harness drives the library
// from the outside (node.Start, transport/tcp, `vigil agent`, libvigil).
// `vigil bench <name>` (cmd/vigil/bench.go) is the entry point; results
// are CSV files, PNG plots and a generated SUMMARY.md.
package bench
