package mpitest

import (
	"bufio"
	_ "embed"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// hostrelay.c is the delay and loss relay of a host's link (see its comment). It
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

// relay is a running hostrelay: the link of one host, with a delay and a
// loss rate.
type relay struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	acks chan struct{} // one per control line in force

	mu    sync.Mutex
	ctl   io.WriteCloser // "delay_ns loss_permille" lines
	delay time.Duration
	loss  int // permille
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
	r := &relay{cmd: cmd, ctl: ctl, done: make(chan struct{}), acks: make(chan struct{}, 16)}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ready <- sc.Scan() && sc.Text() == "ready"
		for sc.Scan() {
			if sc.Text() == "ok" {
				r.acks <- struct{}{}
			}
		}
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

// setDelay sets the delay of the frames that leave the host from now on
// (once it returns).
func (r *relay) setDelay(d time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delay = d
	return r.send()
}

// setLoss sets the rate, in permille, at which frames are lost in either
// direction from now on (once it returns).
func (r *relay) setLoss(permille int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loss = permille
	return r.send()
}

// send writes the control line and waits until the relay applies it to
// every frame it reads from then on; r.mu is held.
func (r *relay) send() error {
	if _, err := fmt.Fprintf(r.ctl, "%d %d\n", r.delay.Nanoseconds(), r.loss); err != nil {
		return err
	}
	select {
	case <-r.acks:
		return nil
	case <-r.done:
		return fmt.Errorf("hostrelay exited: %v", r.cmd.ProcessState)
	case <-time.After(5 * time.Second):
		return fmt.Errorf("hostrelay did not apply delay %v and loss %d‰ within 5 s", r.delay, r.loss)
	}
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
