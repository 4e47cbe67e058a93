package verbs

import "github.com/vigil-hpc/vigil/internal/wire"

// The replay and rejoin tests reach the transport through these (kept apart
// so that the tests could first be run against the code before them).

func setPeers(tr *Transport, addrs []string) error { return tr.SetPeers(addrs) }

// heartbeatSeq returns the sequence number of a captured heartbeat datagram.
func heartbeatSeq(f wire.Frame) (uint64, bool) {
	h, _, ok := packetOf(f)
	return h.seq, ok && h.kind == kindHeartbeat
}

// packetOf returns the packet of a captured datagram.
func packetOf(f wire.Frame) (pktHeader, []byte, bool) {
	if f.Type != wire.Msg {
		return pktHeader{}, nil, false
	}
	_, h, frag, err := decodeDatagram(f.Payload)
	return h, frag, err == nil
}
