package daemon

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Local process monitoring (seed 003 §4.4): the daemon observes the
// processes of its node with operating-system services, not heartbeats
// over the network.
//
//   - Children it started: exec.Cmd.Wait (waitid) returns when one ends.
//   - Processes that attached over the Unix socket but are not its
//     children: a pidfd (pidfd_open), readable once the process ends, waited
//     on in Go's netpoller (no thread, no polling).
//   - Hangs, for both: the process's heartbeat word in the shared table
//     (HeartbeatTable) not moving, or the kernel showing the process stopped
//     (state T or t in /proc/<pid>/stat), for the hang time-out.

// pidWatch waits for a process that is not our child to end.
type pidWatch struct {
	f *os.File
}

// watchPid calls gone (from its own goroutine) once process pid has ended.
// Close stops the watch without calling gone.
func watchPid(pid int, gone func()) (*pidWatch, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("daemon: pidfd_open(%d): %w", pid, err)
	}
	f := os.NewFile(uintptr(fd), "pidfd:"+strconv.Itoa(pid))
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	go func() {
		// Read's callback runs when the netpoller reports the pidfd
		// readable (the process exited); false means "not yet, wait".
		err := rc.Read(func(fd uintptr) bool {
			p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(p, 0)
			return err != nil || n > 0
		})
		if err == nil {
			gone()
		}
	}()
	return &pidWatch{f: f}, nil
}

// Close stops the watch.
func (w *pidWatch) Close() error { return w.f.Close() }

// kill sends SIGKILL through the pidfd: never to another process that
// reused the pid.
func (w *pidWatch) kill() error {
	rc, err := w.f.SyscallConn()
	if err != nil {
		return err
	}
	var kerr error
	if err := rc.Control(func(fd uintptr) { kerr = unix.PidfdSendSignal(int(fd), unix.SIGKILL, nil, 0) }); err != nil {
		return err
	}
	return kerr
}

// procStopped reports whether the kernel shows process pid stopped (by a
// signal, state T, or by a tracer, state t).
func procStopped(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) S ...: comm may hold spaces and parentheses; the state
	// follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	s := b[i+2]
	return s == 'T' || s == 't'
}

// exitCause classifies how a child ended: exit status 0 is a departure, a
// non-zero status Exited, a signal (or a failed wait) Crashed.
func exitCause(err error, ps *os.ProcessState) Cause {
	switch {
	case ps == nil:
		return Crashed
	case ps.Success():
		return Left
	case ps.Exited():
		return Exited
	}
	return Crashed
}

// secretEnv are the variables holding job keys (the daemons' and the local
// launcher's): the daemon's children, applications, get none of them.
var secretEnv = []string{"VIGIL_DAEMON_KEY=", "VIGIL_KEY="}

// withoutSecrets returns env without the secretEnv variables.
func withoutSecrets(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		return slices.ContainsFunc(secretEnv, func(p string) bool { return strings.HasPrefix(kv, p) })
	})
}

// spawner starts the local processes from one OS thread of its own, locked
// for the daemon's life: a child's parent-death signal fires when the
// thread that forked it ends, and Go ends any thread whose locked goroutine
// returns (the heartbeat thread of a daemon closed in the same process, say).
// A thread no other goroutine can take ends only with the spawner.
type spawner struct {
	reqs chan func()
	done chan struct{}
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan func()), done: make(chan struct{})}
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the spawner
		defer close(s.done)
		for f := range s.reqs {
			f()
		}
	}()
	return s
}

// spawn is the package's spawn, run on the spawner's thread.
func (s *spawner) spawn(argv []string, rank, node uint32, sock string, stdout, stderr *os.File) (cmd *exec.Cmd, err error) {
	ran := make(chan struct{})
	s.reqs <- func() { cmd, err = spawn(argv, rank, node, sock, stdout, stderr); close(ran) }
	<-ran
	return cmd, err
}

// close ends the spawner's thread (its children get their parent-death
// signal).
func (s *spawner) close() {
	close(s.reqs)
	<-s.done
}

// spawn starts one local process with the daemon's environment plus
// VIGIL_RANK, VIGIL_NODE and VIGIL_DAEMON_SOCK (when the daemon has a
// socket), in the daemon's process group (a node's whole population dies
// with one kill of the group), with SIGKILL as its parent-death signal.
func spawn(argv []string, rank, node uint32, sock string, stdout, stderr *os.File) (*exec.Cmd, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(withoutSecrets(os.Environ()),
		"VIGIL_RANK="+strconv.FormatUint(uint64(rank), 10),
		"VIGIL_NODE="+strconv.FormatUint(uint64(node), 10))
	if sock != "" {
		cmd.Env = append(cmd.Env, EnvSocket+"="+sock)
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("daemon: starting rank %d (%s): %w", rank, argv[0], err)
	}
	return cmd, nil
}
