package imb

import (
	"crypto/rand"

	"github.com/vigil-hpc/vigil/transport"
	"github.com/vigil-hpc/vigil/transport/tcp"
)

// NewTCPGroup is a Group of n ranks over Vigil's TCP transport on
// 127.0.0.1.
func NewTCPGroup(n int) (*Group, error) {
	key := make([]byte, 32)
	rand.Read(key)
	open := func(r int, h transport.Handler) (transport.Transport, error) {
		tr, err := tcp.Listen(tcp.Config{
			Self: uint32(r), N: n, JobID: 0xbe7c4, Key: key, Slots: transport.NewSlots(n), Handler: h,
			MaxPayload: IMBMaxSize + 64, QueueLen: 4 * IMBMaxReps,
		})
		if err != nil {
			return nil, err // not a nil *tcp.Transport in a non-nil interface
		}
		return tr, nil
	}
	connect := func(trs []transport.Transport) error {
		addrs := make([]string, len(trs))
		for i, tr := range trs {
			addrs[i] = tr.(*tcp.Transport).Addr()
		}
		for _, tr := range trs {
			if err := tr.(*tcp.Transport).SetPeers(addrs); err != nil {
				return err
			}
		}
		return nil
	}
	return NewGroup(n, open, connect)
}
