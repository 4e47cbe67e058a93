package bcast

import "github.com/vigil-hpc/vigil/ranks"

// Send is one message for each rank of To.
type Send struct {
	To  []ranks.Rank
	Msg Message
}

// Out is what a Propagator asks its driver to do: deliver broadcasts here
// (each at most once) and send messages, in order. Step and Tick append to
// the driver's Out, so a driver can reuse one (Reset) and a hop allocates
// nothing for it.
type Out struct {
	Deliver []Message
	Sends   []Send
}

// Propagator is one rank's broadcast state machine: forward-once flooding
// over an Overlay (Broadcaster) or a corrected gossip (Gossip). Like the
// overlays it is pure: time comes in from the driver (monotonic
// nanoseconds), and it is not safe for concurrent use.
type Propagator interface {
	// Name is the algorithm's short name ("hba", "fcg", "ctree", ...).
	Name() string
	// Begin starts broadcasting m (its Kind, Dead, D, DetectedAt and
	// Payload; the participants are {0..n-1} \ D) from this rank: it
	// stamps m's ID and Detector (this rank), and returns m, for the
	// caller to deliver here, and what to send now.
	Begin(now int64, m Message) (Message, []Send)
	// Step handles m, received from rank from, appending what to do to
	// out. localDead (may be nil) holds ranks known dead here: nothing is
	// sent to them.
	Step(now int64, from ranks.Rank, m Message, localDead *ranks.Set, out *Out) error
	// Tick appends the timed work due by now to out; nothing is sent to
	// the ranks of localDead (may be nil).
	Tick(now int64, localDead *ranks.Set, out *Out)
	// Next returns when Tick next has work to do, 0 for never.
	Next() int64
}

// Name returns the overlay's name.
func (b *Broadcaster) Name() string { return b.o.Name() }

// Begin is Start as a Propagator.
func (b *Broadcaster) Begin(_ int64, msg Message) (Message, []Send) {
	m, to := b.Start(msg.Kind, msg.Dead, msg.D, msg.DetectedAt)
	m.Payload = msg.Payload
	if len(to) == 0 {
		return m, nil
	}
	return m, []Send{{To: to, Msg: m}}
}

// Step is Receive as a Propagator: a first reception is delivered and
// forwarded.
func (b *Broadcaster) Step(_ int64, _ ranks.Rank, m Message, localDead *ranks.Set, out *Out) error {
	if m.Hop.Phase != PhaseNone {
		return errorf("Hop.Phase", "a %v gossip message to an overlay (%s) broadcaster", m.Hop.Phase, b.o.Name())
	}
	first, fwd, err := b.Receive(m, localDead)
	if err != nil || !first {
		return err
	}
	out.Deliver = append(out.Deliver, m)
	if len(fwd) > 0 {
		out.Sends = append(out.Sends, Send{To: fwd, Msg: m})
	}
	return nil
}

// Tick has nothing to do: flooding is not timed.
func (b *Broadcaster) Tick(int64, *ranks.Set, *Out) {}

// Reset empties out, keeping its buffers.
func (out *Out) Reset() {
	clear(out.Deliver) // drop references to the messages
	clear(out.Sends)
	out.Deliver, out.Sends = out.Deliver[:0], out.Sends[:0]
}

// Next is always 0.
func (b *Broadcaster) Next() int64 { return 0 }

// withoutDead returns rs without the ranks of dead (nil: none): rs itself
// when none is dropped, else a new slice (rs may be an overlay's, not the
// caller's to edit).
func withoutDead(rs []ranks.Rank, dead *ranks.Set) []ranks.Rank {
	if dead == nil || dead.Len() == 0 {
		return rs
	}
	drop := 0
	for _, r := range rs {
		if dead.Has(r) {
			drop++
		}
	}
	if drop == 0 {
		return rs
	}
	kept := make([]ranks.Rank, 0, len(rs)-drop)
	for _, r := range rs {
		if !dead.Has(r) {
			kept = append(kept, r)
		}
	}
	return kept
}
