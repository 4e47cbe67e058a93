package sim

import (
	"fmt"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/ranks"
)

// BroadcastConfig describes one broadcast driven through the real
// bcast.Broadcaster of every rank, over a network model.
type BroadcastConfig struct {
	N       int
	Overlay bcast.Overlay
	Net     Network
	Source  ranks.Rank
	// Known is the source's dead list, carried in the message: those ranks
	// are not participants.
	Known ranks.Set
	// Dead are ranks dead before the broadcast that the source does not
	// know of: they are participants that never answer.
	Dead []ranks.Rank
	// Failing are ranks that crash during the broadcast, At after it
	// starts. A rank that crashes before it is done sending a message does
	// not send it.
	Failing []Failure
	// LocalDead, when set, makes each rank pass Known ∪ Dead as the
	// localDead of Broadcaster.Receive, as a rank whose detector knows
	// them would.
	LocalDead bool
	// Exhaustive hands every copy to the Broadcaster (duplicates too).
	Exhaustive bool
}

// BroadcastResult is what one broadcast did. Times are from its start.
type BroadcastResult struct {
	// Recv is when each rank first delivered (0 for the source), -1 if it
	// never did (or was not a participant).
	Recv []int64
	// Done is when each rank was done sending its forward list (its Recv if
	// it forwarded nothing), -1 if it never delivered.
	Done []int64
	// Participants counts the alive participants other than the source at
	// the end, Reached those of them that delivered.
	Participants, Reached int
	// Latency is the last delivery among alive ranks, Completion the last
	// time an alive rank was done sending.
	Latency, Completion int64
	// Msgs counts messages sent.
	Msgs uint64
}

// Consistent reports whether every alive participant delivered.
func (r *BroadcastResult) Consistent() bool { return r.Reached == r.Participants }

// SimulateBroadcast runs one broadcast of cfg (randomness of the network
// from seed) in the discrete-event engine, every rank being a
// bcast.Broadcaster.
func SimulateBroadcast(cfg BroadcastConfig, seed uint64) (BroadcastResult, error) {
	n := cfg.N
	if n < 1 || cfg.Overlay == nil || cfg.Net == nil || int64(cfg.Source) >= int64(n) {
		return BroadcastResult{}, fmt.Errorf("sim: bad BroadcastConfig (n=%d, overlay %v, net %v, source %d)", n, cfg.Overlay, cfg.Net, cfg.Source)
	}
	death := make([]int64, n)
	for i := range death {
		death[i] = 1<<62 - 1
	}
	for _, r := range cfg.Dead {
		death[r] = -1
	}
	if death[cfg.Source] < 0 || cfg.Known.Has(cfg.Source) {
		return BroadcastResult{}, fmt.Errorf("sim: the source %d is dead", cfg.Source)
	}
	var en Engine
	for _, f := range cfg.Failing {
		death[f.Rank] = f.At
		en.Schedule(Event{At: f.At, Kind: evFail, Node: f.Rank})
	}
	var localDead *ranks.Set
	if cfg.LocalDead {
		s := cfg.Known.Clone()
		for _, r := range cfg.Dead {
			s.Add(r)
		}
		localDead = &s
	}
	ports := cfg.Net.NewPorts(n, newRand(seed, streamNet))
	nodes := make([]*bcast.Broadcaster, n)
	res := BroadcastResult{Recv: make([]int64, n), Done: make([]int64, n)}
	for i := range res.Recv {
		res.Recv[i], res.Done[i] = -1, -1
	}
	send := func(from ranks.Rank, to []ranks.Rank, now int64) {
		done := now
		for _, r := range to {
			alive := death[r] > now
			sent, at := ports.Transfer(now, from, r, alive)
			if sent >= death[from] {
				break // crashed while sending
			}
			res.Msgs++
			done = sent
			if alive && (cfg.Exhaustive || res.Recv[r] < 0) {
				en.Schedule(Event{At: at, Kind: evBcast, Node: r, B: uint64(from)})
			}
		}
		res.Done[from] = done
	}
	node := func(r ranks.Rank) *bcast.Broadcaster {
		if nodes[r] == nil {
			nodes[r] = bcast.NewBroadcaster(r, n, cfg.Overlay)
		}
		return nodes[r]
	}
	msg, to := node(cfg.Source).Start(bcast.Failed, []ranks.Rank{cfg.Source}, cfg.Known, 0)
	res.Recv[cfg.Source] = 0
	send(cfg.Source, to, 0)
	for {
		e, ok := en.Next(1<<62 - 1)
		if !ok {
			break
		}
		if e.Kind != evBcast || death[e.Node] <= e.At {
			continue
		}
		r := ranks.Rank(e.Node)
		if res.Recv[r] >= 0 && !cfg.Exhaustive {
			continue
		}
		first, fwd, err := node(r).Receive(msg, localDead)
		if err != nil {
			return res, err
		}
		if first != (res.Recv[r] < 0) {
			return res, fmt.Errorf("sim: rank %d: Receive said first=%v, delivered before: %v", r, first, res.Recv[r] >= 0)
		}
		if !first {
			continue
		}
		res.Recv[r] = e.At
		send(r, fwd, e.At)
	}
	for r := range n {
		if ranks.Rank(r) == cfg.Source || cfg.Known.Has(ranks.Rank(r)) || death[r] < 1<<62-1 {
			continue
		}
		res.Participants++
		if res.Recv[r] >= 0 {
			res.Reached++
		}
	}
	for r := range n {
		if death[r] == 1<<62-1 && res.Recv[r] >= 0 {
			res.Latency = max(res.Latency, res.Recv[r])
			res.Completion = max(res.Completion, res.Done[r])
		}
	}
	return res, nil
}
