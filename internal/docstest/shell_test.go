package docstest

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/lab/mpitest"
)

// tree is a copy of the repository, where the blocks run one after the
// other as a reader would run them in a fresh clone.
type tree struct {
	dir string
	env []string
}

// copyTree copies the files git knows in root (tracked, and untracked but
// not ignored: the working tree as it is) into a directory of its own. The
// directory's path is always the same, os.TempDir()/vigil-docstest/vigil,
// so that Go's build cache, whose keys include a package's directory, serves
// the builds of the previous run; it is emptied first and removed at the
// end, and a lock on its parent keeps two runs apart.
func copyTree(t *testing.T, root string) *tree {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "-co", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files in %s: %v (the docs test copies the files git knows)", root, err)
	}
	parent := filepath.Join(os.TempDir(), "vigil-docstest")
	if err := os.MkdirAll(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	lock, err := os.Open(parent)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("locking %s: %v", parent, err)
	}
	dst := filepath.Join(parent, "vigil")
	t.Cleanup(func() {
		os.RemoveAll(dst)
		lock.Close() // unlocks
	})
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, f)
		st, err := os.Lstat(src)
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the working tree
			}
			t.Fatal(err)
		}
		to := filepath.Join(dst, f)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			l, err := os.Readlink(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(l, to); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "PATH=/usr/local/go/bin:"+os.Getenv("PATH"), "TERM=dumb")
	return &tree{dir: dst, env: env}
}

// shell is a block running in bash, in a process group of its own.
type shell struct {
	t    *testing.T
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error // the exit status, once done is closed
}

// start runs block b's text with bash -e -o pipefail in tr's directory:
// a command that fails fails the block. wrap, when given, is the command
// that runs bash (such as unshare). When the test ends, the block's process
// group and every process it started are killed.
func (tr *tree) start(t *testing.T, b Block, extraEnv []string, wrap ...string) *shell {
	t.Helper()
	script := filepath.Join(t.TempDir(), b.Name+".sh")
	if err := os.WriteFile(script, []byte(b.Text), 0o644); err != nil {
		t.Fatal(err)
	}
	argv := append(append([]string{}, wrap...), "bash", "-e", "-o", "pipefail", script)
	s := &shell{t: t, cmd: exec.Command(argv[0], argv[1:]...), done: make(chan struct{})}
	s.cmd.Dir, s.cmd.Env = tr.dir, append(append([]string{}, tr.env...), extraEnv...)
	s.cmd.Stdout, s.cmd.Stderr = s, s
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("block %q (README line %d) started", b.Name, b.Line)
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(s.kill)
	return s
}

// Write collects the block's output.
func (s *shell) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.Write(p)
}

// Output returns what the block printed so far.
func (s *shell) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// wait waits up to timeout for the block to end and returns its error
// (nil for exit status 0); it fails the test at the deadline.
func (s *shell) wait(timeout time.Duration) error {
	s.t.Helper()
	select {
	case <-s.done:
		return s.err
	case <-time.After(timeout):
		s.t.Fatalf("the block did not end within %v; its output:\n%s", timeout, s.Output())
	}
	return nil
}

// await polls the output every 50 ms until cond returns "" and fails the
// test with cond's last answer at the deadline or if the block ends first.
func (s *shell) await(what string, timeout time.Duration, cond func(out string) string) {
	s.t.Helper()
	end := time.Now().Add(timeout)
	for {
		why := cond(s.Output())
		if why == "" {
			return
		}
		select {
		case <-s.done:
			if why = cond(s.Output()); why == "" {
				return
			}
			s.t.Fatalf("the block ended (%v) while waiting for %s: %s; its output:\n%s", s.err, what, why, s.Output())
		default:
		}
		if time.Now().After(end) {
			s.t.Fatalf("timed out after %v waiting for %s: %s; the block's output:\n%s", timeout, what, why, s.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// signal sends sig to the block's process group, as a terminal's Ctrl-C
// (SIGINT) does to the foreground job.
func (s *shell) signal(sig syscall.Signal) {
	syscall.Kill(-s.cmd.Process.Pid, sig)
}

// kill kills the block's process group and every process descended from
// it (mpirun puts its ranks in process groups of their own).
func (s *shell) kill() {
	pids := mpitest.Descendants(s.cmd.Process.Pid)
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	for _, p := range pids {
		syscall.Kill(p, syscall.SIGKILL)
	}
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.t.Errorf("the block's shell (pid %d) survived SIGKILL", s.cmd.Process.Pid)
	}
}

// lines returns the lines of out that match re, with their submatches.
func lines(out string, re *regexp.Regexp) [][]string { return re.FindAllStringSubmatch(out, -1) }

var _ io.Writer = (*shell)(nil)
