// Package imb runs the IMB-MPI1 loads (PingPong, PingPing, Sendrecv,
// Exchange, Bcast, Allreduce, Barrier) in Go over any set of Vigil
// transports, with IMB's repetition rule and its reduction of times across
// ranks. The benchmark harness (the bench module) measures Vigil's overhead
// on them, and the verbs transport's tests run them over RDMA; it lives in
// the library module, without the harness's dependencies, for the latter.
package imb
