package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/settings"
)

// checkBroadcast checks the broadcast name b ("": the default), naming the
// setting as interface n does. The gossip values are node.Config.Validate's
// to check, whatever the broadcast (their errors are *settings.BoundError,
// renamed by boundError).
func checkBroadcast(b string, n settings.Names) error {
	if b != "" && !slices.Contains(node.Broadcasts, b) {
		return fmt.Errorf("%s = %q, want one of %s", settings.Broadcast.Name(n), b, strings.Join(node.Broadcasts, ", "))
	}
	return nil
}
