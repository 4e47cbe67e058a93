//go:build race

package node_test

// raceEnabled: the race detector slows the event loops about tenfold, so
// long loops run shorter.
const raceEnabled = true
