package era_test

import (
	"github.com/vigil-hpc/vigil/era"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// The harness of the internal tests (harness_test.go) sends every message
// through the wire encoding, which lives in internal/wire: era stays a pure
// core that imports no codec.
func init() { era.SetTestCodec(wire.AppendEraMsg, wire.DecodeEraMsg) }
