// Package wire is Vigil's one codec package for protocol messages: it holds
// the versioned binary encodings of every message Vigil's components
// exchange — the node's protocol messages, carried inside Msg frames; the
// agreement (ERA) messages; the daemons' messages — and the authenticated
// frame layer of the TCP transport. Everything is encoded with
// encoding/binary, as explicit little-endian words or uvarints; nothing
// uses gob or JSON. (Formats private to one package stay there: the verbs
// transport's reliability packets, the shared-memory handshake, the local
// bootstrap's tables, and the JSON lines between a daemon and the
// processes of its node.)
//
// The message types are wire's, except the agreement message era.Msg,
// which is the data of package era's protocol core: wire imports era (and
// bcast, ranks), never the reverse, so era stays a pure core without a
// codec, and package daemon uses wire's daemon messages (its Report,
// ProcFailure and Cause are aliases of wire's).
//
// # Frames
//
// A frame is a fixed 28-byte header, the payload and a 16-byte tag:
//
//	off  size  field
//	0    2     magic "VG"
//	2    1     version (2)
//	3    1     type (Hello, Msg, Heartbeat, Bye)
//	4    8     job ID, little-endian
//	12   4     sender rank, little-endian
//	16   8     sender incarnation, little-endian
//	24   4     payload length, little-endian (at most MaxPayload, 1 MiB by default)
//	28   len   payload
//	28+len 16  tag = HMAC-SHA256(job key, [challenge || index ||] header || payload)[:16]
//
// With Params.MAC = MACSipHash (the verbs transport's datagrams) the
// version byte is VersionSipHash (0x82) and the tag is
// SipHash-2-4-128(k, header || payload), k being the first 16 bytes of
// HMAC-SHA256(job key, a fixed label): half the cost per small datagram
// on the host, a sixth under emulation. A codec accepts only its own function's version.
//
// On a stream connection (the TCP transport's messages) the accepting end
// first sends a 16-byte random Challenge, and both ends Bind their codecs
// to it: the tag then also covers the challenge and the frame's index on
// the connection (8 bytes, little-endian, from 0 at the Hello). A frame,
// or a whole recorded session, replayed on another connection fails its
// check, and so does a frame repeated, dropped or reordered on the same
// one. Datagrams (UDP heartbeats) cannot be bound to a connection: a
// heartbeat's payload (Beat) names instead, under the tag, the receiver's
// rank and incarnation, and carries the emitter's sequence number; with
// the emitter's incarnation in the header, a heartbeat captured on its way
// to one observer is refused by every other rank (wrong_receiver), by a
// later incarnation of the same one (wrong_incarnation), and by that one
// once its word has passed the sequence number (old_heartbeat).
//
// A Codec encodes and checks the frames of one connection; it owns a
// reusable HMAC state, so checking a frame does not allocate. Checks
// fail with an *Error whose Reason is one of the Reason constants, used
// as the key of the transports' rejection counters. A Session adds the
// per-connection rules (Hello first, one sender and one incarnation per
// connection, no incarnation older than one already seen from that rank).
//
// Frame payloads: Hello (AppendHello, DecodeHello: the rank the sender
// meant to reach), Heartbeat (AppendHeartbeat, DecodeHeartbeat,
// HeartbeatFrame: Beat, the receiver's rank and incarnation and the
// emitter's sequence number), Bye (empty) and Msg (one
// node message, below).
//
// # Node messages
//
// The node's protocol messages (message.go, agree.go, sync.go, probe.go)
// start with a type byte (MsgType); see AppendMessage and DecodeMessage,
// which takes a rank bound. They are NewObserver (seed 000's NEWOBSERVER),
// Leave (a clean departure), Bcast (one broadcast of package bcast),
// Evicted (the fail-stop order to a rank held dead), Agree (one ERA
// message, below, with the code of its agreement operation), Sync (the
// repair of dead lists), and Probe and Alive (the block mending of
// hb.Ring). Their uvarints must be canonical (minimal).
//
// # ERA messages
//
// The agreement messages of package era, era.Msg of kind UP, DOWN or
// RESULTREQUEST (era.go): AppendEraMsg and DecodeEraMsg, format version 1
// in the high nibble of the first byte. Agree carries them and requires
// the canonical encoding.
//
// # Daemon reports
//
// The daemons of package daemon run the same detector as ranks do (the
// messages above); a daemon's report of its local processes' failures,
// Report (made of ProcFailure and Cause), is the payload of a note
// (bcast.Note). It starts with a type byte ('R') and uses fixed-size
// little-endian fields; see AppendReport and DecodeReport, which checks it
// against the job's number of processes (Report.Validate).
//
// # Errors
//
// Every decoder rejects malformed input with an *Error naming the field
// (such as "bcast.d", "agree.msg.dead[3]" or "daemon.report.procs[0].rank")
// with one of the Reason constants, never panics, and allocates at most in
// proportion to the input length.
//
// # Fuzzing
//
// Every decoder has a fuzz test seeded with valid encodings. Plain
// `go test` runs the seed corpora only; to fuzz one target, for instance
// from a Makefile:
//
//	go test ./internal/wire -run '^$' -fuzz '^FuzzDecodeFrame$' -fuzztime 60s
//	go test ./internal/wire -run '^$' -fuzz '^FuzzReadFrames$' -fuzztime 60s
//	go test ./internal/wire -run '^$' -fuzz '^FuzzDecodeMessage$' -fuzztime 60s
//	go test ./internal/wire -run '^$' -fuzz '^FuzzDecodeSync$' -fuzztime 30s
//	go test ./internal/wire -run '^$' -fuzz '^FuzzDecodeHello$' -fuzztime 30s
//	go test ./internal/wire -run '^$' -fuzz '^FuzzDecodeHeartbeat$' -fuzztime 30s
//	go test ./internal/wire -run '^$' -fuzz '^FuzzDecodeEraMsg$' -fuzztime 30s
//	go test ./internal/wire -run '^$' -fuzz '^FuzzDecodeReport$' -fuzztime 30s
//
// (-fuzz accepts one target per run; scripts/fuzz.sh runs every target of
// the module.) Crashers land in testdata/fuzz and become regression seeds
// on the next plain `go test`.
package wire
