// Package wire holds Vigil's versioned binary encodings: the authenticated
// frame layer of the TCP transport and the protocol messages carried inside
// Msg frames. Everything is encoded with encoding/binary, as explicit
// little-endian words or canonical (minimal) uvarints; nothing uses gob or
// JSON.
//
// # Frames
//
// A frame is a fixed 28-byte header, the payload and a 16-byte tag:
//
//	off  size  field
//	0    2     magic "VG"
//	2    1     version (1)
//	3    1     type (Hello, Msg, Heartbeat, Bye)
//	4    8     job ID, little-endian
//	12   4     sender rank, little-endian
//	16   8     sender incarnation, little-endian
//	24   4     payload length, little-endian (at most MaxPayload, 1 MiB by default)
//	28   len   payload
//	28+len 16  tag = HMAC-SHA256(job key, header || payload)[:16]
//
// A Codec encodes and checks the frames of one connection; it owns a
// reusable HMAC state, so checking a frame does not allocate. Checks
// fail with an *Error whose Reason is one of the Reason constants, used
// as the key of the transports' rejection counters. A Session adds the
// per-connection rules (Hello first, one sender and one incarnation per
// connection, no incarnation older than one already seen from that rank).
//
// # Messages
//
// Protocol messages (NewObserver, Leave, Bcast, Evicted, Agree, which
// carries the agreement messages of package era, and Sync, which repairs
// dead lists) start with a type byte;
// see AppendMessage and DecodeMessage. Decoders reject malformed input with
// an *Error naming the field, never panic, and allocate at most in
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
//
// (-fuzz accepts one target per run.) Crashers land in testdata/fuzz and
// become regression seeds on the next plain `go test`.
package wire
