# mk/capi.mk — Vigil's C ABI: libvigil (./capi built as c-shared and
# c-archive), its C examples, and the PMPI interposition library.
# Include it from the top Makefile:  include mk/capi.mk
#
#   make libvigil     out/lib/libvigil.so, out/lib/libvigil.a, out/include/vigil.h
#   make c-examples   out/bin/{detect,explicit,apicheck,detect-static}
#   make pmix-bridge  out/bin/{vigil_pmix_bridge,pmix_listener} (daemon/PMIX.md)
#   make pmpi         out/lib/libvigil_pmpi.so (LD_PRELOAD) and .a, out/bin/pmpi_ring
#   make capi-test    the Go tests of the C ABI and of PMIx (need gcc; the
#                     mpirun ones need openmpi-bin, libopenmpi-dev, libpmix-dev)
#
# VIGIL_TAGS=pmix (the default) links libpmix and needs libpmix-dev and
# pkg-config; with VIGIL_TAGS= libvigil loads libpmix at run time instead
# (dlopen of libpmix.so.2, Debian's libpmix2, or $VIGIL_LIBPMIX).

GO         ?= go
CC         ?= gcc
MPICC      ?= mpicc
VIGIL_TAGS ?= pmix
VIGIL_OUT  ?= out
CAPI_CFLAGS ?= -O2 -g -Wall -Wextra

VIGIL_LIBDIR := $(abspath $(VIGIL_OUT)/lib)
VIGIL_BINDIR := $(abspath $(VIGIL_OUT)/bin)
VIGIL_INCDIR := $(abspath $(VIGIL_OUT)/include)
# Linking libvigil.a also needs libpmix when it was built with PMIx.
VIGIL_STATIC_LIBS := -lpthread $(if $(filter pmix,$(VIGIL_TAGS)),$(shell pkg-config --libs pmix 2>/dev/null))
VIGIL_SHARED_LIBS := -L$(VIGIL_LIBDIR) -lvigil -Wl,-rpath,$(VIGIL_LIBDIR)

.PHONY: libvigil c-examples pmpi pmix-bridge capi-test

# go build decides itself what is out of date, so these always run it.
libvigil:
	mkdir -p $(VIGIL_LIBDIR) $(VIGIL_INCDIR)
	$(GO) build -tags '$(VIGIL_TAGS)' -buildmode=c-shared -o $(VIGIL_LIBDIR)/libvigil.so ./capi
	$(GO) build -tags '$(VIGIL_TAGS)' -buildmode=c-archive -o $(VIGIL_LIBDIR)/libvigil.a ./capi
	rm -f $(VIGIL_LIBDIR)/libvigil.h  # cgo's generated header: csrc/vigil.h is the interface
	cp csrc/vigil.h $(VIGIL_INCDIR)/vigil.h
	cp csrc/vigil_daemon.h $(VIGIL_INCDIR)/vigil_daemon.h

c-examples: libvigil
	mkdir -p $(VIGIL_BINDIR)
	$(CC) $(CAPI_CFLAGS) -Icsrc -o $(VIGIL_BINDIR)/detect csrc/examples/detect.c $(VIGIL_SHARED_LIBS)
	$(CC) $(CAPI_CFLAGS) -Icsrc -o $(VIGIL_BINDIR)/explicit csrc/examples/explicit.c $(VIGIL_SHARED_LIBS)
	$(CC) $(CAPI_CFLAGS) -Icsrc -o $(VIGIL_BINDIR)/apicheck csrc/tests/apicheck.c $(VIGIL_SHARED_LIBS) -lpthread
	$(CC) $(CAPI_CFLAGS) -Icsrc -o $(VIGIL_BINDIR)/daemoncheck csrc/tests/daemoncheck.c $(VIGIL_SHARED_LIBS)
	$(CC) $(CAPI_CFLAGS) -Icsrc -o $(VIGIL_BINDIR)/detect-static csrc/examples/detect.c $(VIGIL_LIBDIR)/libvigil.a $(VIGIL_STATIC_LIBS)

# The PMPI library: LD_PRELOAD it (mpirun -x LD_PRELOAD=out/lib/libvigil_pmpi.so)
# or link it before the MPI library (mpicc app.c -Lout/lib -lvigil_pmpi -lvigil).
pmpi: libvigil
	mkdir -p $(VIGIL_BINDIR)
	$(MPICC) $(CAPI_CFLAGS) -fPIC -shared -Icsrc -o $(VIGIL_LIBDIR)/libvigil_pmpi.so csrc/pmpi/vigil_pmpi.c $(VIGIL_SHARED_LIBS)
	$(MPICC) $(CAPI_CFLAGS) -fPIC -Icsrc -c -o $(VIGIL_LIBDIR)/vigil_pmpi.o csrc/pmpi/vigil_pmpi.c
	ar rcs $(VIGIL_LIBDIR)/libvigil_pmpi.a $(VIGIL_LIBDIR)/vigil_pmpi.o
	rm -f $(VIGIL_LIBDIR)/vigil_pmpi.o
	$(MPICC) $(CAPI_CFLAGS) -o $(VIGIL_BINDIR)/pmpi_ring csrc/pmpi/examples/pmpi_ring.c

# The PMIx forwarding bridge for `vigil daemon` events (daemon/PMIX.md).
pmix-bridge:
	mkdir -p $(VIGIL_BINDIR)
	$(CC) $(CAPI_CFLAGS) -o $(VIGIL_BINDIR)/vigil_pmix_bridge csrc/pmix/vigil_pmix_bridge.c $$(pkg-config --cflags --libs pmix)
	$(CC) $(CAPI_CFLAGS) -o $(VIGIL_BINDIR)/pmix_listener csrc/pmix/pmix_listener.c $$(pkg-config --cflags --libs pmix)

capi-test:
	$(GO) test -count=1 -p 1 -v ./bootstrap/pmix/... ./capi/
