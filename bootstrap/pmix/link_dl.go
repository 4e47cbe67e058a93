//go:build !pmix && cgo

package pmix

// Without the tag, vgpmix_dl.c loads libpmix at run time.

/*
#cgo LDFLAGS: -ldl
*/
import "C"
