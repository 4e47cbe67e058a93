// Package ranks holds the rank type shared by every Vigil package and Set,
// a sorted set of ranks used for dead lists (the papers' D_i).
//
// A Set is a sorted slice, not a bitset: dead lists are small next to the
// number of ranks (at most a few hundred dead among up to 256,000 ranks), and
// the broadcast overlays need the position of a rank among the alive ranks,
// which a sorted slice answers with one binary search.
package ranks

import (
	"fmt"
	"slices"
	"sort"
)

// Rank identifies one process (or one node daemon) of a job, 0 ≤ Rank < N.
type Rank = uint32

// Set is a sorted set of distinct ranks. The zero value is an empty set.
// A Set is not safe for concurrent use.
type Set struct {
	r []Rank
}

// Of returns the set holding the given ranks (duplicates are dropped).
func Of(rs ...Rank) Set {
	var s Set
	s.AddRanks(rs)
	return s
}

// FromSorted returns a set over rs, which must be strictly increasing;
// it returns an error naming the first offending position otherwise.
// The set takes ownership of rs.
func FromSorted(rs []Rank) (Set, error) {
	for i := 1; i < len(rs); i++ {
		if rs[i] <= rs[i-1] {
			return Set{}, fmt.Errorf("ranks: not strictly increasing at index %d (%d after %d)", i, rs[i], rs[i-1])
		}
	}
	return Set{r: rs}, nil
}

// Len returns the number of ranks in the set.
func (s *Set) Len() int { return len(s.r) }

// Has reports whether r is in the set.
func (s *Set) Has(r Rank) bool {
	_, ok := slices.BinarySearch(s.r, r)
	return ok
}

// Add inserts r and reports whether it was absent.
func (s *Set) Add(r Rank) bool {
	i, ok := slices.BinarySearch(s.r, r)
	if ok {
		return false
	}
	s.r = slices.Insert(s.r, i, r)
	return true
}

// AddAll inserts every rank of o and returns the ranks that were new, in
// increasing order: one merge, O(|s| + |o| log |s|).
func (s *Set) AddAll(o Set) []Rank {
	var added []Rank
	for _, r := range o.r {
		if !s.Has(r) {
			added = append(added, r)
		}
	}
	s.merge(added)
	return added
}

// AddRanks inserts the ranks of rs (in any order, repeats allowed) and
// returns those that were absent, in the order of their first occurrence
// in rs (nil if none). It is one merge, O(|s| + k log k) for k ranks,
// where k calls of Add move up to |s| ranks each.
func (s *Set) AddRanks(rs []Rank) []Rank {
	var added []Rank
	for _, r := range rs {
		if !s.Has(r) {
			added = append(added, r)
		}
	}
	if len(added) <= 1 {
		s.merge(added)
		return added
	}
	sorted := slices.Clone(added)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	if len(sorted) < len(added) { // repeats: keep each rank's first occurrence
		seen := make(map[Rank]struct{}, len(sorted))
		added = slices.DeleteFunc(added, func(r Rank) bool {
			_, dup := seen[r]
			seen[r] = struct{}{}
			return dup
		})
	}
	s.merge(sorted)
	return added
}

// merge inserts add, strictly increasing and disjoint from s, in place:
// from the back, each block of s between two ranks of add moved once
// (a memmove), O(|s| + k log |s|) for k ranks.
func (s *Set) merge(add []Rank) {
	if len(add) == 0 {
		return
	}
	hi := len(s.r) // s.r[:hi] have not moved yet
	s.r = slices.Grow(s.r, len(add))[:hi+len(add)]
	for j := len(add) - 1; j >= 0; j-- {
		i, _ := slices.BinarySearch(s.r[:hi], add[j])
		copy(s.r[i+j+1:], s.r[i:hi]) // above add[j], below add[j+1]
		s.r[i+j] = add[j]
		hi = i
	}
}

// Members returns the ranks in increasing order. The slice is shared with
// the set: callers must not modify it.
func (s *Set) Members() []Rank { return s.r }

// Clone returns an independent copy.
func (s Set) Clone() Set { return Set{r: slices.Clone(s.r)} }

// Equal reports whether both sets hold the same ranks.
func (s Set) Equal(o Set) bool { return slices.Equal(s.r, o.r) }

// CountBelow returns the number of ranks in the set that are < r.
func (s *Set) CountBelow(r Rank) int {
	i, _ := slices.BinarySearch(s.r, r)
	return i
}

// AliveLabel returns the position of alive rank r among the ranks of
// {0..n-1} that are not in s (its index in the complement A), and false if r
// is in s or r >= n.
func (s *Set) AliveLabel(r Rank, n int) (int, bool) {
	if int64(r) >= int64(n) || s.Has(r) {
		return 0, false
	}
	return int(r) - s.CountBelow(r), true
}

// AliveAt returns the alive rank with index idx in the complement A of s in
// {0..n-1}, that is the inverse of AliveLabel. idx must be in [0, n-|s|).
func (s *Set) AliveAt(idx, n int) Rank {
	// D[j] - j counts the alive ranks below D[j]; the answer is idx + j for
	// the first j with D[j] - j > idx. O(log |D|).
	j := sort.Search(len(s.r), func(j int) bool { return int(s.r[j])-j > idx })
	return Rank(idx + j)
}

// String formats the set as {a,b,c}.
func (s Set) String() string { return fmt.Sprint(s.r) }
