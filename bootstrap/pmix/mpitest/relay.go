package mpitest

import (
	"bufio"
	_ "embed"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// hostrelay.c is the delay relay of a host's link (see its comment). It
// is a C program of its own, not goroutines of the test process: a Go
// thread woken by a frame must get a scheduler P back, which another,
// normal-priority thread may hold, so that a loaded machine would delay
// frames far beyond the delay asked for.
//
//go:embed hostrelay/hostrelay.c
var relaySource []byte

// buildRelay compiles hostrelay into dir.
func buildRelay(dir string) (string, error) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		return "", fmt.Errorf("no C compiler (cc) for the delay relay: %w", err)
	}
	src, bin := filepath.Join(dir, "hostrelay.c"), filepath.Join(dir, "hostrelay")
	if err := os.WriteFile(src, relaySource, 0o644); err != nil {
		return "", err
	}
	if out, err := exec.Command(cc, "-O2", "-Wall", "-Wextra", "-Werror", "-o", bin, src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("cc hostrelay.c: %v\n%s", err, out)
	}
	return bin, nil
}

// relay is a running hostrelay: the link of one host, with a delay.
type relay struct {
	cmd  *exec.Cmd
	ctl  io.WriteCloser // the delays, one per line
	done chan struct{}  // closed when the process has exited
}

// newRelay starts bin between the interfaces hostLink and bridgeLink of
// the root namespace and waits until it relays.
func newRelay(bin, hostLink, bridgeLink string) (*relay, error) {
	cmd := exec.Command(bin, hostLink, bridgeLink)
	cmd.Stderr = os.Stderr
	ctl, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &relay{cmd: cmd, ctl: ctl, done: make(chan struct{})}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ready <- sc.Scan() && sc.Text() == "ready"
		io.Copy(io.Discard, out)
		cmd.Wait()
		close(r.done)
	}()
	select {
	case ok := <-ready:
		if ok {
			return r, nil
		}
	case <-time.After(10 * time.Second):
	}
	r.close()
	return nil, fmt.Errorf("hostrelay %s %s did not start", hostLink, bridgeLink)
}

// setDelay sets the delay of the frames that leave the host from now on.
func (r *relay) setDelay(d time.Duration) error {
	_, err := fmt.Fprintf(r.ctl, "%d\n", d.Nanoseconds())
	return err
}

// close stops the relay: it exits at the end of its input.
func (r *relay) close() {
	r.ctl.Close()
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
		r.cmd.Process.Kill()
		<-r.done
	}
}
