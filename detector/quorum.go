package detector

import (
	"fmt"
	"log/slog"

	"github.com/vigil-hpc/vigil/era"
	"github.com/vigil-hpc/vigil/ranks"
)

// Partitions without split brain, outside the seeds (which assume crash
// failures). A network partition cuts the job in two sides; each declares
// the other dead, and both would go on as the job. A rank therefore holds
// a membership M, the job's ranks less those an agreement (ERA) decided
// dead while the ranks that decided were a quorum of M (clean departures
// stay in M: a job stopping rank by rank must not leave its last ranks a
// minority of the departed), and it keeps going only while the ranks of M it holds
// crashed are not a majority of M:
//
//   - fewer than half of M dead: it goes on;
//   - more than half: it stops at once (fail-stop, Ready.Minority);
//   - exactly half: it goes on only while it holds M's lowest rank alive.
//
// Two disjoint sides cannot both pass: a side that passes holds more than
// half of M alive, or exactly half together with M's lowest rank, and a
// side never holds one of its own live ranks dead (a rank is reported only
// on its own silence). Both sides evaluate the rule on their own, since M
// is the same on both: the departures and decisions it follows were known
// before the cut, and a decision taken during the cut moves M only on the
// side holding a quorum (every rank outside an ERA decision's dead set
// contributed to it, so its survivors are ranks connected to each other).
//
// A decision whose deciders are not a quorum of M is held back, not
// delivered (quorumDecided): on the minority side of a partition an
// agreement could otherwise return the majority dead to the application
// before the rule stops the rank.
//
// The rule is evaluated whenever a death is learned or a decision
// arrives, not after the detections settle. The count only grows, a true
// majority's never reaches half (its own ranks are not in it), and the
// side that wins a tie never holds its lowest rank dead, so the stop is
// never premature; a side that is really a minority may go on
// until it has detected enough of the other side, a few δ. A job that
// really lost more than half of M at once (a burst, no partition) stops
// too: its survivors cannot tell the crash from a partition whose other
// side lives on, and which side lives is exactly what the rule must not
// guess. Config.Partition = PartitionContinue keeps the behaviour from
// before: such a rank goes on, and a healed partition is resolved by the
// split probes (split.go).

// PartitionMode is what a rank does when the rule above says it is not
// in the quorum.
type PartitionMode uint8

const (
	// PartitionFailStop (the default) stops the rank at once: Ready.Evicted
	// and Ready.Minority.
	PartitionFailStop PartitionMode = iota
	// PartitionContinue lets it go on (logged once); a healed partition
	// is then resolved by the split probes and EVICTED (split.go).
	PartitionContinue
)

// String returns the mode's flag value: "failstop" or "continue".
func (m PartitionMode) String() string {
	switch m {
	case PartitionFailStop:
		return "failstop"
	case PartitionContinue:
		return "continue"
	}
	return fmt.Sprintf("PartitionMode(%d)", uint8(m))
}

// ParsePartitionMode parses "failstop" or "continue" (String).
func ParsePartitionMode(s string) (PartitionMode, error) {
	switch s {
	case "failstop":
		return PartitionFailStop, nil
	case "continue":
		return PartitionContinue, nil
	}
	return 0, fmt.Errorf("detector: partition mode %q: want failstop or continue", s)
}

// quorumState is the membership M and this rank's count of its dead.
type quorumState struct {
	out      ranks.Set  // ranks out of M: departed, or agreed dead by a quorum of M
	dead     int        // ranks of M this rank holds crashed
	minority bool       // stopped by the rule (Ready.Minority)
	held     []Decision // decided by no quorum of M (quorumDecided)
	warned   bool       // PartitionContinue: the rule's failure was logged
}

// inQuorum reports whether a side of a membership of m ranks that lost
// lost of them (lowestLost: M's lowest rank among them) may go on.
func inQuorum(m, lost int, lowestLost bool) bool {
	switch {
	case 2*lost < m:
		return true
	case 2*lost > m:
		return false
	}
	return !lowestLost
}

// members returns |M|.
func (c *Core) members() int { return c.cfg.Size - c.quorum.out.Len() }

// lowestMember returns M's lowest rank: the first rank missing from out
// (sorted).
func (c *Core) lowestMember() ranks.Rank {
	for i, r := range c.quorum.out.Members() {
		if r != ranks.Rank(i) {
			return ranks.Rank(i)
		}
	}
	return ranks.Rank(c.quorum.out.Len())
}

// Members returns the size of this rank's membership M: the job less the
// ranks that departed and those agreed dead by a quorum (quorum.go).
func (c *Core) Members() int { return c.members() }

// Minority reports whether this rank stopped because it held more than
// half of its membership dead, or half without its lowest rank
// (Ready.Minority).
func (c *Core) Minority() bool { return c.quorum.minority }

// quorumLearned counts the ranks of gone (just learned gone) against M and
// applies the rule.
func (c *Core) quorumLearned(gone []ranks.Rank) {
	q := &c.quorum
	for _, r := range gone {
		switch {
		case c.left(r):
			// A clean departure stays in M: a job that stops rank by rank
			// must not leave its last ranks a minority of the departed.
		case !q.out.Has(r):
			q.dead++
		}
	}
	if len(gone) > 0 {
		c.checkQuorum()
	}
}

// quorumDecided delivers decision d, and moves M on by it: its dead ranks
// leave M when the ranks that decided, M less them, pass the rule for M (a
// quorum of M contributed to it). Otherwise, under PartitionFailStop, the
// decision is held back: it was reached by at most half of M, which is a
// minority side's decision and must not reach the application as the
// job's (the minority stops by the rule as soon as it learns the deaths
// the decision names, and its Agree calls fail), or a decision that
// overtook an earlier one not yet decided here that moves M first; held
// decisions are tried again, in order, whenever M moves.
func (c *Core) quorumDecided(d Decision) {
	q := &c.quorum
	if c.cfg.Partition == PartitionContinue {
		c.moveMembership(&d.Decision)
		c.decided(d)
		return
	}
	if !c.moveMembership(&d.Decision) {
		c.log(slog.LevelInfo, "agreement decided by no quorum of the membership: held back", "id", d.ID,
			"members", c.members(), "agreed_dead", d.Dead.Len())
		q.held = append(q.held, d)
		return
	}
	c.decided(d)
	for moved := true; moved && len(q.held) > 0; {
		moved = false
		for i, h := range q.held {
			if c.moveMembership(&h.Decision) {
				c.decided(h)
				q.held = append(q.held[:i], q.held[i+1:]...)
				moved = true
				break
			}
		}
	}
	c.checkQuorum()
}

// moveMembership takes the dead ranks of d out of M if d's survivors are a
// quorum of M, and reports whether they were (true when d names no rank of
// M).
func (c *Core) moveMembership(d *era.Decision) bool {
	q := &c.quorum
	var fresh []ranks.Rank
	for _, r := range d.Dead.Members() {
		if !q.out.Has(r) {
			fresh = append(fresh, r)
		}
	}
	if len(fresh) == 0 {
		return true
	}
	if !inQuorum(c.members(), len(fresh), d.Dead.Has(c.lowestMember())) {
		return false
	}
	q.out.AddRanks(fresh)
	for _, r := range fresh {
		if c.gone.has(r) {
			q.dead-- // counted when learned (departed ranks are already out)
		}
	}
	return true
}

// checkQuorum applies the rule: a rank not in the quorum stops (or, with
// PartitionContinue, says so once). A departing rank is exempt.
func (c *Core) checkQuorum() {
	q := &c.quorum
	if c.evicted || c.ring.Left() {
		return
	}
	m, lowest := c.members(), c.lowestMember()
	lowestLost := c.ring.Dead().Has(lowest)
	if inQuorum(m, q.dead, lowestLost) {
		return
	}
	args := []any{"members", m, "dead", q.dead, "lowest", lowest, "lowest_dead", lowestLost}
	if c.cfg.Partition == PartitionContinue {
		if !q.warned {
			q.warned = true
			c.log(slog.LevelInfo, "this rank holds most of the job's membership dead (minority partition, or most ranks lost); going on (partition mode continue)", args...)
		}
		return
	}
	q.minority, c.evicted = true, true
	c.log(slog.LevelError, "this rank holds most of the job's membership dead: minority partition (or most ranks lost at once); stopping (fail-stop)", args...)
	c.ring.Leave()
	c.rd.Evicted, c.rd.Minority = true, true
}
