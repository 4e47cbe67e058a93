// Package wire is Vigil's one codec package: the versioned binary encodings
// of every message Vigil's components exchange — the authenticated frames
// of the transports, the node's protocol messages carried inside Msg
// frames, the agreement (ERA) messages and the daemons' reports — with
// encoding/binary, as explicit little-endian words or uvarints. The byte
// layouts are in docs/wire.md.
//
// The message types are wire's, except the agreement message era.Msg,
// which is the data of package era's protocol core: wire imports era (and
// bcast, ranks), never the reverse, so era stays a pure core without a
// codec, and package daemon uses wire's daemon messages (its Report,
// ProcFailure and Cause are aliases of wire's).
//
//   - Frames: a 28-byte header (magic, version, type, job ID, sender rank
//     and incarnation, payload length), the payload and a 16-byte tag,
//     HMAC-SHA256 under the job key or, for the verbs transport's
//     datagrams, SipHash-2-4-128 (Params.MAC). A Codec encodes and checks
//     the frames of one connection without allocating; bound to a stream's
//     Challenge (Codec.Bind), its tags also cover the challenge and the
//     frame's index. A Session adds the per-connection rules (Hello first,
//     one sender and incarnation, none older than one already seen).
//   - Node messages (AppendMessage, DecodeMessage): NewObserver, Leave,
//     Bcast, Evicted, Agree, Sync, Probe and Alive.
//   - ERA messages (AppendEraMsg, DecodeEraMsg) and daemon reports
//     (AppendReport, DecodeReport).
//
// Every decoder rejects malformed input with an *Error naming the field
// (such as "bcast.d" or "agree.msg.dead[3]") and one of the Reason
// constants (the keys of the transports' rejection counters), never
// panics, allocates at most in proportion to the input, and has a fuzz
// test seeded with valid encodings (scripts/fuzz.sh runs them all; one:
// go test ./internal/wire -run '^$' -fuzz '^FuzzDecodeFrame$').
package wire
