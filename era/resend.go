package era

// Resend is for transports that may lose a message to a live process (the
// paper assumes reliable channels; TCP drops messages to a peer that is not
// listening yet, or when a peer's queue is full). It repeats, for every
// agreement that was already open at the previous call, the message this
// process awaits an answer to:
//
//   - broadcasting and undecided: its UP, to Parent(S_p, p) — the parent
//     answers a repeated UP with its DOWN once decided (Part 2), or folds
//     it in again (F is idempotent);
//   - a gathering root that is not the original root: RESULTREQUEST to the
//     children that have not answered yet.
//
// Every other wait is on a process that resends itself (a child that has
// sent its UP) or that has not started the agreement. Repeated messages
// change nothing at their receivers, so calling Resend periodically (say
// every few hundred ms) is safe; agreements shorter than the period are
// never repeated.
func (c *Core) Resend() []Out {
	var out []Out
	for _, a := range c.open {
		if !a.started || a.decided || a.tree == nil {
			continue
		}
		if a.resendAge++; a.resendAge < 2 {
			continue
		}
		p, hasParent := a.tree.Parent(c.self, &c.dead)
		switch {
		case a.status == broadcasting && hasParent:
			out = append(out, c.upMsg(a, p))
		case a.status == gathering && !hasParent && !a.origRoot:
			var known *Msg
			for _, k := range c.children(a) {
				if a.contributed.Has(k) {
					continue
				}
				if known == nil {
					known = &Msg{Kind: ResultRequest, ID: a.id, Dead: c.dead.Clone()}
				}
				out = append(out, Out{To: k, Msg: *known})
			}
		}
	}
	return out
}
