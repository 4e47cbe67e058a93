package verbs

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	ibv "github.com/vigil-hpc/vigil/verbs"
)

// addrPrefix starts every verbs address published through the bootstrap;
// oldPrefix started those of builds whose datagrams were not bound to the
// receiver's incarnation (refused: every rank must speak the same format).
const (
	addrPrefix = "verbs2:"
	oldPrefix  = "verbs1:"
)

// Address is what one rank publishes through the bootstrap exchange: how
// to reach its UD QP (messages, fallback heartbeats) and where its slot
// array is (the RDMA-write target of its emitters). The RC QP numbers of
// heartbeat links are exchanged later, over the UD channel, when an
// emitter first targets this rank as its observer. Inc is the incarnation
// of the transport that published it: every datagram sent to that rank
// names it under the MAC, so that a datagram captured in a session with a
// previous incarnation of the rank is refused by the next one.
type Address struct {
	GID   ibv.GID // source GID of the UD QP (RoCE: an IP address of the netdev)
	LID   uint16  // InfiniBand LID (0 on RoCE)
	QPN   uint32  // UD QP number
	QKey  uint32  // UD Q_Key
	Slots ibv.RemoteMR
	Inc   uint64 // the publisher's incarnation (not 0)
}

// String encodes the address as
// "verbs2:<gid hex>:<lid>:<qpn>:<qkey>:<slot addr hex>:<slot bytes>:<rkey hex>:<incarnation hex>".
func (a Address) String() string {
	return fmt.Sprintf("%s%s:%d:%d:%d:%x:%d:%x:%x", addrPrefix, hex.EncodeToString(a.GID[:]), a.LID, a.QPN, a.QKey,
		a.Slots.Addr, a.Slots.Len, a.Slots.RKey, a.Inc)
}

// IsAddress reports whether s looks like a verbs address (and not, say, a
// TCP host:port another rank published).
func IsAddress(s string) bool { return strings.HasPrefix(s, addrPrefix) }

// ParseAddress decodes String's form; errors name the bad field.
func ParseAddress(s string) (Address, error) {
	var a Address
	if strings.HasPrefix(s, oldPrefix) {
		return a, fmt.Errorf("verbs address %q: format %q of an older build, without the incarnation (every rank must run the same version)", trunc(s), oldPrefix)
	}
	if !IsAddress(s) {
		return a, fmt.Errorf("verbs address %q: does not start with %q (a rank without verbs published a tcp address?)", trunc(s), addrPrefix)
	}
	f := strings.Split(s[len(addrPrefix):], ":")
	if len(f) != 8 {
		return a, fmt.Errorf("verbs address %q: %d fields, want 8", trunc(s), len(f))
	}
	g, err := hex.DecodeString(f[0])
	if err != nil || len(g) != len(a.GID) {
		return a, fmt.Errorf("verbs address %q: gid %q is not 32 hex digits", trunc(s), trunc(f[0]))
	}
	copy(a.GID[:], g)
	num := func(name, v string, base, bits int) (uint64, error) {
		n, err := strconv.ParseUint(v, base, bits)
		if err != nil {
			return 0, fmt.Errorf("verbs address %q: %s %q is not a %d-bit number", trunc(s), name, trunc(v), bits)
		}
		return n, nil
	}
	vals := [7]uint64{}
	specs := [7]struct {
		name       string
		base, bits int
	}{{"lid", 10, 16}, {"qpn", 10, 24}, {"qkey", 10, 32}, {"slot address", 16, 64}, {"slot bytes", 10, 32}, {"rkey", 16, 32},
		{"incarnation", 16, 64}}
	for i, sp := range specs {
		if vals[i], err = num(sp.name, f[i+1], sp.base, sp.bits); err != nil {
			return a, err
		}
	}
	a.LID, a.QPN, a.QKey = uint16(vals[0]), uint32(vals[1]), uint32(vals[2])
	a.Slots = ibv.RemoteMR{Addr: vals[3], Len: vals[4], RKey: uint32(vals[5])}
	if a.Inc = vals[6]; a.Inc == 0 {
		return a, fmt.Errorf("verbs address %q: incarnation 0", trunc(s))
	}
	if a.Slots.Addr%8 != 0 || a.Slots.Len%8 != 0 {
		return a, fmt.Errorf("verbs address %q: slot array %#x+%d not 8-byte aligned", trunc(s), a.Slots.Addr, a.Slots.Len)
	}
	if a.GID.IsZero() && a.LID == 0 {
		return a, fmt.Errorf("verbs address %q: neither a GID nor a LID", trunc(s))
	}
	return a, nil
}

func trunc(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

// endpoint returns the UD endpoint of the address.
func (a Address) endpoint() ibv.Endpoint {
	return ibv.Endpoint{QPN: a.QPN, LID: a.LID, GID: a.GID, QKey: a.QKey}
}
