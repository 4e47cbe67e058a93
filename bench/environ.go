package bench

import "os"

// environ is the environment children inherit.
func environ() []string { return os.Environ() }
