package main

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// The sporadic detector of seed 004: no periodic traffic; a rank checks a
// peer only when it waits on it, with one ping-pong and a time-out.
//
// Protocol, one TCP connection per probe: the prober sends
// {job ID u64 little-endian, nonce [16]byte}; the peer answers
// HMAC-SHA256(key, "vigil-probe" ‖ job ‖ nonce ‖ its rank u32) and closes.
// A refused connection (nobody listens there any more: the process is
// gone), no valid answer within the time-out, or a wrong answer (someone
// else holds the address) count as dead.

const (
	probeReqLen   = 8 + 16
	probeAnswerTO = 5 * time.Second // how long the answering side waits for a request
)

// prober answers probes of this rank and probes others.
type prober struct {
	rank  uint32
	jobID uint64
	key   []byte
	ln    net.Listener
	peers []string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func listenProber(addr string, rank uint32, jobID uint64, key []byte) (*prober, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &prober{rank: rank, jobID: jobID, key: key, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *prober) addr() string { return p.ln.Addr().String() }

func (p *prober) answer(nonce []byte, rank uint32) []byte {
	m := hmac.New(sha256.New, p.key)
	m.Write([]byte("vigil-probe"))
	m.Write(binary.LittleEndian.AppendUint64(nil, p.jobID))
	m.Write(nonce)
	m.Write(binary.LittleEndian.AppendUint32(nil, rank))
	return m.Sum(nil)
}

func (p *prober) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns[c] = struct{}{}
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

// probe checks rank r: nil if it answered correctly within timeout.
func (p *prober) probe(r uint32, timeout time.Duration) error {
	if int(r) >= len(p.peers) {
		return fmt.Errorf("no rank %d", r)
	}
	deadline := time.Now().Add(timeout)
	c, err := net.DialTimeout("tcp", p.peers[r], timeout)
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
		return fmt.Errorf("rank %d's address %s answered with a wrong authenticator", r, p.peers[r])
	}
	return nil
}

func (p *prober) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
