package daemon

import (
	"os"
	"strings"
	"testing"
)

// TestSpawnWithoutSecrets: a spawned local process gets the daemon's
// environment without the job keys.
func TestSpawnWithoutSecrets(t *testing.T) {
	t.Setenv("VIGIL_DAEMON_KEY", "00112233445566778899aabbccddeeff")
	t.Setenv("VIGIL_KEY", "ffeeddccbbaa99887766554433221100")
	t.Setenv("VIGIL_SPAWN_TEST", "kept")
	out, err := os.CreateTemp(t.TempDir(), "env")
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := spawn([]string{"env"}, 3, 1, "", out, out)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	env := string(b)
	for _, want := range []string{"VIGIL_SPAWN_TEST=kept", "VIGIL_RANK=3", "VIGIL_NODE=1"} {
		if !strings.Contains(env, want) {
			t.Errorf("child environment lacks %s", want)
		}
	}
	for _, secret := range []string{"VIGIL_DAEMON_KEY", "VIGIL_KEY="} {
		if strings.Contains(env, secret) {
			t.Errorf("child environment holds %s", secret)
		}
	}
}
