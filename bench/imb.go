package bench

import "github.com/vigil-hpc/vigil/lab/imb"

// The Go IMB loads live in the library module (lab/imb), where the
// verbs transport's tests use them too; these names keep the harness's API.
type (
	Load        = imb.Load
	Result      = imb.Result
	RankTimes   = imb.RankTimes
	RunOptions  = imb.RunOptions
	Comm        = imb.Comm
	Group       = imb.Group
	OpenFunc    = imb.OpenFunc
	ConnectFunc = imb.ConnectFunc
)

// The IMB-MPI1 loads, in IMB's order in Loads.
const (
	PingPong  = imb.PingPong
	PingPing  = imb.PingPing
	Sendrecv  = imb.Sendrecv
	Exchange  = imb.Exchange
	Bcast     = imb.Bcast
	Allreduce = imb.Allreduce
	Barrier   = imb.Barrier

	IMBMaxReps = imb.IMBMaxReps
	IMBOverall = imb.IMBOverall
	IMBMaxSize = imb.IMBMaxSize
)

var (
	// Loads lists every load in IMB's order.
	Loads = imb.Loads
	// ParseLoad returns the load named s (IMB's spelling).
	ParseLoad = imb.ParseLoad
	// IMBSizes is IMB's size list 0, 1, 2, 4, … up to maxSize.
	IMBSizes = imb.IMBSizes
	// IMBReps is IMB's repetition count for a size.
	IMBReps = imb.IMBReps
	// AcrossRanks reduces per-rank times as IMB does.
	AcrossRanks = imb.AcrossRanks
	// RunIMB runs one load on one rank's Comm.
	RunIMB = imb.RunIMB
	// NewGroup opens n transports in process and connects them.
	NewGroup = imb.NewGroup
	// NewTCPGroup is a group of n ranks over the TCP transport on loopback.
	NewTCPGroup = imb.NewTCPGroup
)
