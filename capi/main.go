// Command capi is Vigil's C interface: built with -buildmode=c-shared or
// -buildmode=c-archive it becomes libvigil.so or libvigil.a, whose functions
// are declared and documented in csrc/vigil.h.
//
//	go build -tags pmix -buildmode=c-shared  -o out/lib/libvigil.so ./capi
//	go build -tags pmix -buildmode=c-archive -o out/lib/libvigil.a  ./capi
//
// (`make libvigil` with mk/capi.mk does both.) Without -tags pmix the
// library loads libpmix at run time (dlopen of libpmix.so.2, or
// $VIGIL_LIBPMIX) when vigil_init_from_env finds a PMIx launcher, and
// returns VIGIL_ERR_NO_PMIX, saying what to install, where it is missing.
//
// The library holds one detector per process. In ring mode it is a
// node.Node over the TCP transport, exactly what `vigil agent` runs; in
// sporadic mode it is a prober answering and sending authenticated
// ping-pongs (see probe.go). Events of either mode go to one event log,
// which vigil_poll reads at its own pace and a dedicated, OS-thread-locked
// goroutine hands to the C failure callback.
package main

func main() {}
