// Package sporadic is the sporadic failure detector of seed 004: no
// periodic traffic at all; a rank checks a peer only when it waits on it,
// with one authenticated ping-pong and a time-out. It suits applications
// that cannot afford a heartbeat thread and learn of failures only when
// they communicate (libvigil's VIGIL_MODE=sporadic, vigil_probe).
//
// Protocol, one TCP connection per probe: the prober sends
// {job ID u64 little-endian, nonce [16]byte}; the peer answers
// HMAC-SHA256(key, "vigil-probe" ‖ job ‖ nonce ‖ its rank u32) and closes.
// A refused connection (nobody listens there any more: the process is
// gone), no valid answer within the time-out, or a wrong answer (someone
// else holds the address) count as dead.
package sporadic

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/vigil-hpc/vigil/internal/limit"
)

const (
	probeReqLen   = 8 + 16
	probeAnswerTO = 5 * time.Second // how long the answering side waits for a request
	// maxProbeConns caps the connections being answered: beyond it the
	// oldest is closed. A rank's probe sends its request as soon as it
	// connects, so strangers' idle connections, closed oldest first, do not
	// make it fail.
	maxProbeConns = 64
)

// Prober answers the probes of this rank and probes the others.
type Prober struct {
	rank  uint32
	jobID uint64
	key   []byte
	ln    net.Listener
	peers []string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	order []net.Conn // conns, oldest first (and some closed ones)
	stop  chan struct{}
	once  sync.Once // closes stop
	wg    sync.WaitGroup
}

// Listen starts answering the probes of rank (of job jobID, keyed with
// key) on the TCP address addr ("host:port", port 0 for any).
func Listen(addr string, rank uint32, jobID uint64, key []byte) (*Prober, error) {
	if len(key) < 16 {
		return nil, fmt.Errorf("sporadic: a key of %d bytes, want at least 16", len(key))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("sporadic: %w", err)
	}
	p := &Prober{rank: rank, jobID: jobID, key: key, ln: ln, conns: map[net.Conn]struct{}{}, stop: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the address the prober answers on, to publish.
func (p *Prober) Addr() string { return p.ln.Addr().String() }

// SetPeers sets every rank's published address, indexed by rank.
func (p *Prober) SetPeers(addrs []string) {
	p.mu.Lock()
	p.peers = append([]string(nil), addrs...)
	p.mu.Unlock()
}

func (p *Prober) answer(nonce []byte, rank uint32) []byte {
	m := hmac.New(sha256.New, p.key)
	m.Write([]byte("vigil-probe"))
	m.Write(binary.LittleEndian.AppendUint64(nil, p.jobID))
	m.Write(nonce)
	m.Write(binary.LittleEndian.AppendUint32(nil, rank))
	return m.Sum(nil)
}

func (p *Prober) accept() {
	defer p.wg.Done()
	acc := limit.Acceptor{Key: "sporadic", Stop: p.stop} // backs off when out of file descriptors
	for {
		c, err := acc.Accept(p.ln)
		if err != nil {
			return
		}
		p.mu.Lock()
		for len(p.conns) >= maxProbeConns {
			old := p.order[0]
			p.order = p.order[1:]
			if _, ok := p.conns[old]; ok {
				delete(p.conns, old)
				old.Close()
			}
		}
		if len(p.order) > 2*maxProbeConns { // drop the closed ones
			p.order = slices.DeleteFunc(p.order, func(o net.Conn) bool { _, ok := p.conns[o]; return !ok })
		}
		p.conns[c] = struct{}{}
		p.order = append(p.order, c)
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer func() {
				p.mu.Lock()
				delete(p.conns, c)
				p.mu.Unlock()
				c.Close()
			}()
			c.SetDeadline(time.Now().Add(probeAnswerTO))
			var req [probeReqLen]byte
			if _, err := io.ReadFull(c, req[:]); err != nil {
				return
			}
			if binary.LittleEndian.Uint64(req[:8]) != p.jobID {
				return // another job's prober: no answer
			}
			c.Write(p.answer(req[8:], p.rank))
		}()
	}
}

// Probe checks rank r: nil if it answered correctly within timeout; the
// error says why it counts as dead.
func (p *Prober) Probe(r uint32, timeout time.Duration) error {
	p.mu.Lock()
	var addr string
	if int(r) < len(p.peers) {
		addr = p.peers[r]
	}
	p.mu.Unlock()
	if addr == "" {
		return fmt.Errorf("sporadic: no address for rank %d", r)
	}
	deadline := time.Now().Add(timeout)
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(deadline)
	var req [probeReqLen]byte
	binary.LittleEndian.PutUint64(req[:8], p.jobID)
	if _, err := rand.Read(req[8:]); err != nil {
		return err
	}
	if _, err := c.Write(req[:]); err != nil {
		return err
	}
	got := make([]byte, sha256.Size)
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if !hmac.Equal(got, p.answer(req[8:], r)) {
		return fmt.Errorf("sporadic: rank %d's address %s answered with a wrong authenticator", r, addr)
	}
	return nil
}

// Close stops answering; later probes of this rank find nobody.
func (p *Prober) Close() {
	p.once.Do(func() { close(p.stop) })
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
