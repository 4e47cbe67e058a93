package shm

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// process is a peer agent's process on this host: its id and its start
// time (field 22 of /proc/<pid>/stat), so that a later process given the
// same id is not taken for it.
type process struct {
	pid   int32
	start uint64
}

// identify returns the process of id pid as it runs now (false: pid is 0,
// from another PID namespace, or gone).
func identify(pid int32) (process, bool) {
	if pid <= 0 {
		return process{}, false
	}
	state, start, err := procStat(pid)
	if err != nil || state == 'Z' || state == 'X' {
		return process{}, false
	}
	return process{pid: pid, start: start}, true
}

// runnable reports whether the process still runs and is neither stopped
// nor gone: running, sleeping or in the disk wait.
func (p *process) runnable() bool {
	state, start, err := procStat(p.pid)
	if err != nil || start != p.start {
		return false
	}
	return state == 'R' || state == 'S' || state == 'D'
}

// procStat reads the state (field 3) and the start time (field 22) of
// process pid from /proc/<pid>/stat. The command name (field 2) may hold
// spaces and parentheses: the fields are counted from its last ')'.
func procStat(pid int32) (state byte, start uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("shm: /proc/%d/stat: no command field", pid)
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("shm: /proc/%d/stat: %d fields after the command", pid, len(f))
	}
	start, err = strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("shm: /proc/%d/stat: start time: %w", pid, err)
	}
	return f[0][0], start, nil
}
