// Package bench measures Vigil's cost and accuracy: IMB-style communication
// loads (over Vigil's TCP transport in Go, and as C programs against real
// MPI in bench/csrc), CPU-noise probes (FTQ, FWQ, selfish detour), the noise
// sweep of seed 003's method (overhead on the maximum latency against the
// natural-variability band), the accuracy sweep of seed 000 §5.3 (smallest
// safe heartbeat period under load), eBPF scheduling attribution, and a
// head-to-head against hashicorp/memberlist.
//
// Nothing here is imported by the library: the harness drives the library
// from the outside (node.Start, transport/tcp, `vigil agent`, libvigil).
// It is its own Go module (github.com/vigil-hpc/vigil/bench, bench/go.mod,
// with a replace directive to the library in ../), so that memberlist,
// cilium/ebpf and gonum/plot are required here and never linked into the
// product's vigil binary. `vigil-bench <name>` (bench/cmd/vigil-bench) is
// the entry point; it runs the product's `vigil agent`s from the binary
// given by -vigil and its own `vigil-bench child ...` processes. Results
// are CSV files, PNG plots and a generated SUMMARY.md.
package bench
