package pmix

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// helperEnv makes the test binary act as one rank of TestMpirunExchange
// instead of running the tests (see TestMain).
const helperEnv = "VIGIL_PMIX_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
	os.Exit(m.Run())
}

// helperReport is what each rank of TestMpirunExchange prints.
type helperReport struct {
	Rank      uint32     `json:"rank"`
	Size      int        `json:"size"`
	Namespace string     `json:"nspace"`
	JobID     uint64     `json:"job"`
	KeyHash   string     `json:"keyhash"`
	Nodes     []string   `json:"nodes"`
	Host      string     `json:"host"`
	Rounds    [][]string `json:"rounds"`
}

// helperAddr is the address rank r publishes in exchange round i: of
// varying length, to catch truncation and mix-ups.
func helperAddr(i int, r uint32) string {
	return fmt.Sprintf("round%d-rank%d-%s", i, r, strings.Repeat("x", int(r)*7))
}

func helperMain() int {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := Join(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	defer c.Close()
	kh := sha256.Sum256(c.Key())
	rep := helperReport{Rank: c.Rank(), Size: c.Size(), Namespace: c.Namespace(), JobID: c.JobID(),
		KeyHash: hex.EncodeToString(kh[:8]), Nodes: c.Nodes()}
	rep.Host, _ = os.Hostname()
	for i := 0; i < 2; i++ {
		addrs, err := c.Exchange(ctx, helperAddr(i, c.Rank()))
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 1
		}
		rep.Rounds = append(rep.Rounds, addrs)
	}
	b, _ := json.Marshal(rep)
	fmt.Printf("%s\n", b)
	return 0
}

func TestJobIDOf(t *testing.T) {
	a, b := JobIDOf("282001409"), JobIDOf("282001410")
	if a == 0 || b == 0 {
		t.Fatalf("zero job ID: %x %x", a, b)
	}
	if a == b {
		t.Fatalf("namespaces 282001409 and 282001410 share job ID %x", a)
	}
	if a != JobIDOf("282001409") {
		t.Fatal("JobIDOf is not deterministic")
	}
}

func TestDeriveKey(t *testing.T) {
	s1 := bytes.Repeat([]byte{1}, SecretLen)
	s2 := bytes.Repeat([]byte{2}, SecretLen)
	k := DeriveKey("ns", s1)
	if len(k) != 32 {
		t.Fatalf("key length %d, want 32", len(k))
	}
	if !bytes.Equal(k, DeriveKey("ns", s1)) {
		t.Fatal("DeriveKey is not deterministic")
	}
	for name, other := range map[string][]byte{
		"other secret":    DeriveKey("ns", s2),
		"other namespace": DeriveKey("ns2", s1),
		// The namespace length is hashed: moving bytes between namespace
		// and secret changes the key.
		"shifted boundary": DeriveKey("ns\x01", s1[1:]),
	} {
		if bytes.Equal(k, other) {
			t.Errorf("%s gives the same key", name)
		}
	}
}

func TestDetect(t *testing.T) {
	t.Setenv(EnvRank, "")
	t.Setenv(EnvNamespace, "")
	if Detect() {
		t.Fatal("Detect with neither variable set")
	}
	t.Setenv(EnvNamespace, "prterun-host-1234@1")
	if !Detect() {
		t.Fatalf("Detect with %s set is false", EnvNamespace)
	}
	t.Setenv(EnvNamespace, "")
	t.Setenv(EnvRank, "3")
	if !Detect() {
		t.Fatalf("Detect with %s set is false", EnvRank)
	}
}

func TestJoinWithoutSupport(t *testing.T) {
	if Available() {
		// The tagged build: outside a PMIx job, PMIx_Init must fail cleanly.
		t.Setenv(EnvRank, "")
		t.Setenv(EnvNamespace, "")
		for _, v := range os.Environ() {
			if k, _, _ := strings.Cut(v, "="); strings.HasPrefix(k, "PMIX_") {
				t.Setenv(k, "")
				os.Unsetenv(k)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := Join(ctx)
		if err == nil {
			// PMIx may start a singleton; it must then be a job of one.
			defer c.Close()
			if c.Size() != 1 || c.Rank() != 0 {
				t.Fatalf("PMIx singleton has rank %d of %d", c.Rank(), c.Size())
			}
			return
		}
		var pe *Error
		if !errors.As(err, &pe) || pe.Op != "PMIx_Init" {
			t.Fatalf("Join outside a PMIx job: %v, want a PMIx_Init error", err)
		}
		t.Logf("Join outside a PMIx job: %v", err)
		return
	}
	_, err := Join(context.Background())
	if !errors.Is(err, ErrNotBuilt) {
		t.Fatalf("Join in a build without PMIx: %v, want ErrNotBuilt", err)
	}
	if !strings.Contains(err.Error(), "-tags pmix") {
		t.Fatalf("error %q does not say how to build with PMIx", err)
	}
}

// TestDlopenABI compiles testdata/abicheck.c, which checks the PMIx types
// and constants vgpmix_dl.c declares for itself against pmix.h, where
// libpmix-dev is installed.
func TestDlopenABI(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skipf("no gcc (%v)", err)
	}
	cflags, err := exec.Command("pkg-config", "--cflags", "pmix").Output()
	if err != nil {
		t.Skipf("no pmix.h to check against (pkg-config --cflags pmix: %v; Debian: libpmix-dev)", err)
	}
	bin := filepath.Join(t.TempDir(), "abicheck")
	args := append([]string{"-Wall", "-Wextra", "-Werror", "-I."}, strings.Fields(string(cflags))...)
	args = append(args, "-o", bin, "testdata/abicheck.c", "-ldl")
	if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if out, err := exec.Command(bin).CombinedOutput(); err != nil {
		t.Fatalf("abicheck: %v\n%s", err, out)
	}
}

// TestJoinNoLibrary: where the PMIx library cannot be loaded, Join fails
// at once with ErrNoLibrary, naming what to install. It runs in a child
// process: a library loaded once stays loaded.
func TestJoinNoLibrary(t *testing.T) {
	if !Available() || tagged {
		t.Skip("libpmix is linked (tag pmix), or there is no cgo")
	}
	const lib = "/nonexistent/libpmix.so.2"
	if os.Getenv(EnvLibrary) == lib {
		_, err := Join(context.Background())
		if !errors.Is(err, ErrNoLibrary) || !strings.Contains(err.Error(), lib) || !strings.Contains(err.Error(), "apt-get install libpmix2") {
			t.Fatalf("Join without the library: %v, want ErrNoLibrary naming %s and the package", err, lib)
		}
		t.Logf("%v", err)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestJoinNoLibrary$", "-test.v")
	cmd.Env = append(os.Environ(), EnvLibrary+"="+lib)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestJoinNoLibrary") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
