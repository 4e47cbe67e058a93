package mpitest

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Parents returns the parent of every process of this host's PID
// namespace, read from /proc/<pid>/stat (processes that exit meanwhile are
// left out).
func Parents() map[int]int {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ...": comm may contain spaces.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			parent[p] = pp
		}
	}
	return parent
}

// Descendants returns the processes descended from pid.
func Descendants(pid int) []int {
	parent := Parents()
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}
