//go:build pmix && cgo

package pmix

// With the tag, vgpmix_linked.c calls libpmix directly (Debian's
// libpmix-dev, found with pkg-config).

/*
#cgo pkg-config: pmix
*/
import "C"
