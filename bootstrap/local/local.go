// Package local is Vigil's built-in launcher bootstrap for one machine: a
// Server (run by `vigil run`) hands out ranks and performs the address
// exchange over a Unix socket in a private directory; each child process
// joins it with Join.
//
// Protocol (all integers little-endian, frames length-prefixed by a uint32):
// a child sends {rank u32, key [32]byte digest, round u32, addr}; once all
// Size ranks have sent for a round, the server answers each with that
// round's address table. Rounds are numbered from 0 in the order a child
// exchanges: each is a fence of its own (the detector's address exchange,
// then its start fence). A child that presents the wrong key, an
// out-of-range rank, a round beyond MaxRounds or a rank twice in one round
// is refused with an error frame naming the problem.
package local

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/vigil-hpc/vigil/bootstrap"
)

const maxFrame = 1 << 20

// MaxRounds is how many exchanges a job's children may make.
const MaxRounds = 8

// Server is the launcher's side of the exchange for one job.
type Server struct {
	id     bootstrap.Identity // Rank unused
	dir    string
	ln     net.Listener
	mu     sync.Mutex
	rounds [MaxRounds]*round
	done   chan struct{}
	wg     sync.WaitGroup
}

// round is one fence: who has joined it, and their addresses.
type round struct {
	addr []string
	conn []net.Conn
	have int
}

// NewServer creates a job of size ranks with a fresh job ID and key and
// listens on a Unix socket in a new private temporary directory.
func NewServer(size int) (*Server, error) {
	if size < 1 {
		return nil, fmt.Errorf("local: size %d, want ≥ 1", size)
	}
	var buf [40]byte
	if _, err := rand.Read(buf[:]); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "vigil-job-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "bootstrap.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("local: listen %s: %w", path, err)
	}
	s := &Server{
		id: bootstrap.Identity{Size: size, JobID: binary.LittleEndian.Uint64(buf[:8]),
			Key: buf[8:40], Server: path},
		dir: dir, ln: ln, done: make(chan struct{}),
	}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Identity returns the job's identity for rank r (to put in a child's
// environment with Identity.Env).
func (s *Server) Identity(r uint32) bootstrap.Identity {
	id := s.id
	id.Rank = r
	return id
}

// Done is closed when every rank has joined the first round and was sent
// its table.
func (s *Server) Done() <-chan struct{} { return s.done }

// Addrs returns the first round's address table once Done is closed.
func (s *Server) Addrs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rd := s.rounds[0]; rd != nil && rd.have == s.id.Size {
		return append([]string(nil), rd.addr...)
	}
	return nil
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go s.serve(c)
	}
}

func keyDigest(key []byte) [32]byte { return sha256.Sum256(append([]byte("vigil-bootstrap"), key...)) }

func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	b, err := readFrame(c)
	if err != nil {
		c.Close()
		return
	}
	refuse := func(format string, args ...any) {
		writeFrame(c, append([]byte{1}, fmt.Sprintf(format, args...)...))
		c.Close()
	}
	req, err := parseJoin(b)
	if err != nil {
		refuse("%v", err)
		return
	}
	want := keyDigest(s.id.Key)
	switch {
	case subtle.ConstantTimeCompare(req.digest[:], want[:]) != 1:
		refuse("wrong job key")
		return
	case int(req.rank) >= s.id.Size:
		refuse("rank %d out of range (size %d)", req.rank, s.id.Size)
		return
	case req.round >= MaxRounds:
		refuse("round %d beyond the last, %d", req.round, MaxRounds-1)
		return
	}
	s.mu.Lock()
	rd := s.rounds[req.round]
	if rd == nil {
		rd = &round{addr: make([]string, s.id.Size), conn: make([]net.Conn, s.id.Size)}
		s.rounds[req.round] = rd
	}
	if rd.conn[req.rank] != nil {
		s.mu.Unlock()
		refuse("rank %d joined round %d twice", req.rank, req.round)
		return
	}
	c.SetReadDeadline(time.Time{})
	rd.conn[req.rank], rd.addr[req.rank] = c, req.addr
	rd.have++
	complete := rd.have == s.id.Size
	s.mu.Unlock()
	if !complete {
		return
	}
	// Fence reached: send everyone the table.
	var table []byte
	table = append(table, 0)
	for _, a := range rd.addr {
		table = binary.LittleEndian.AppendUint32(table, uint32(len(a)))
		table = append(table, a...)
	}
	for _, cc := range rd.conn {
		writeFrame(cc, table)
		cc.Close()
	}
	if req.round == 0 {
		close(s.done)
	}
}

// joinRequest is a child's frame: its rank, the digest of the job's key,
// the round it joins and its address.
type joinRequest struct {
	rank, round uint32
	digest      [32]byte
	addr        string
}

// parseJoin decodes a join request.
func parseJoin(b []byte) (joinRequest, error) {
	var r joinRequest
	if len(b) < 40 {
		return r, fmt.Errorf("short join request (%d bytes, want at least 40)", len(b))
	}
	r.rank = binary.LittleEndian.Uint32(b)
	copy(r.digest[:], b[4:36])
	r.round = binary.LittleEndian.Uint32(b[36:40])
	r.addr = string(b[40:])
	return r, nil
}

// appendJoin encodes a join request.
func appendJoin(b []byte, r joinRequest) []byte {
	b = binary.LittleEndian.AppendUint32(b, r.rank)
	b = append(b, r.digest[:]...)
	b = binary.LittleEndian.AppendUint32(b, r.round)
	return append(b, r.addr...)
}

// Close stops the server and removes its directory.
func (s *Server) Close() error {
	s.ln.Close()
	s.mu.Lock()
	for _, rd := range s.rounds {
		if rd == nil {
			continue
		}
		for _, c := range rd.conn {
			if c != nil {
				c.Close()
			}
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
	return os.RemoveAll(s.dir)
}

// Client is a child's bootstrap.Bootstrap over the local launcher.
type Client struct {
	id      bootstrap.Identity
	perHost int // pretended ranks per host (bootstrap.EnvRanksPerHost), 0: none
	mu      sync.Mutex
	round   uint32 // the next Exchange's round
}

// Join returns the bootstrap of a process started by the local launcher,
// from its environment.
func Join() (*Client, error) {
	id, err := bootstrap.IdentityFromEnv()
	if err != nil {
		return nil, err
	}
	c := &Client{id: id}
	if v := os.Getenv(bootstrap.EnvRanksPerHost); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 {
			return nil, fmt.Errorf("local: %s=%q is not a positive integer", bootstrap.EnvRanksPerHost, v)
		}
		c.perHost = k
	}
	return c, nil
}

// Hosts implements bootstrap.HostLister: the pretended host of every rank
// ("host<r/k>") when bootstrap.EnvRanksPerHost = k was set, or k was given
// to NewClientHosts, else nil.
func (c *Client) Hosts() []string {
	if c.perHost == 0 {
		return nil
	}
	hosts := make([]string, c.id.Size)
	for r := range hosts {
		hosts[r] = "host" + strconv.Itoa(r/c.perHost)
	}
	return hosts
}

// NewClient returns the bootstrap for an explicit identity (in-process use).
func NewClient(id bootstrap.Identity) *Client { return &Client{id: id} }

// NewClientHosts is NewClient with the ranks pretended to be placed
// perHost per host (rank r on host r/perHost; 0: no hosts), as
// bootstrap.EnvRanksPerHost does for Join.
func NewClientHosts(id bootstrap.Identity, perHost int) *Client {
	return &Client{id: id, perHost: max(perHost, 0)}
}

// Rank implements bootstrap.Bootstrap.
func (c *Client) Rank() uint32 { return c.id.Rank }

// Size implements bootstrap.Bootstrap.
func (c *Client) Size() int { return c.id.Size }

// JobID implements bootstrap.Bootstrap.
func (c *Client) JobID() uint64 { return c.id.JobID }

// Key implements bootstrap.Bootstrap.
func (c *Client) Key() []byte { return c.id.Key }

// Close implements bootstrap.Bootstrap.
func (c *Client) Close() error { return nil }

// Exchange implements bootstrap.Bootstrap. Each call is the next round, a
// fence of its own.
func (c *Client) Exchange(ctx context.Context, addr string) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rd := c.round
	c.round++
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.id.Server)
	if err != nil {
		return nil, fmt.Errorf("local: joining launcher at %s: %w", c.id.Server, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	req := appendJoin(nil, joinRequest{rank: c.id.Rank, round: rd, digest: keyDigest(c.id.Key), addr: addr})
	if err := writeFrame(conn, req); err != nil {
		return nil, fmt.Errorf("local: join request: %w", err)
	}
	b, err := readFrame(conn)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("local: waiting for the other ranks: %w", ctx.Err())
		}
		return nil, fmt.Errorf("local: reading address table: %w", err)
	}
	if len(b) == 0 {
		return nil, errors.New("local: empty answer from launcher")
	}
	if b[0] == 1 {
		return nil, fmt.Errorf("local: launcher refused rank %d: %s", c.id.Rank, b[1:])
	}
	return parseTable(b[1:], c.id.Size)
}

func parseTable(b []byte, size int) ([]string, error) {
	out := make([]string, 0, size)
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, errors.New("local: truncated address table")
		}
		n := binary.LittleEndian.Uint32(b)
		b = b[4:]
		if uint64(n) > uint64(len(b)) {
			return nil, errors.New("local: address length exceeds table")
		}
		out = append(out, string(b[:n]))
		b = b[n:]
	}
	if len(out) != size {
		return nil, fmt.Errorf("local: address table has %d entries, want %d", len(out), size)
	}
	return out, nil
}

func writeFrame(w io.Writer, b []byte) error {
	buf := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b)))
	_, err := w.Write(append(buf, b...))
	return err
}

func readFrame(r io.Reader) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(h[:])
	if n > maxFrame {
		return nil, fmt.Errorf("local: frame of %d bytes exceeds %d", n, maxFrame)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}
