package era

// codec is the encoding the test harness sends every message through. It
// is internal/wire's (AppendEraMsg, DecodeEraMsg), installed by
// wire_test.go: internal/wire imports era, so only an external test file
// (package era_test) may import it. Until it is installed, using it panics.
var codec = struct {
	encode func(dst []byte, m *Msg) ([]byte, error)
	decode func(b []byte) (Msg, error)
}{
	encode: func([]byte, *Msg) ([]byte, error) { panic("era tests: no codec installed (see wire_test.go)") },
	decode: func([]byte) (Msg, error) { panic("era tests: no codec installed (see wire_test.go)") },
}

// SetTestCodec installs the codec of the test harness; see codec. It is
// defined in a test file: era itself has no codec.
func SetTestCodec(encode func(dst []byte, m *Msg) ([]byte, error), decode func(b []byte) (Msg, error)) {
	codec.encode, codec.decode = encode, decode
}
