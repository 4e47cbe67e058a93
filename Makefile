# Vigil — make targets. The two set-up commands of the README are
# `make demo` (the main job) and `make test` (the whole suite).
GO ?= /usr/local/go/bin/go
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)

.PHONY: all build build-verbs vigil-bench demo test unit e2e docs-test fuzz lint bench bench-full microbench sim bench-sim clean rxe-test


all: build

build:
	$(GO) build -o bin/vigil ./cmd/vigil

# The bench module's command (bench/go.mod): benchmarks and the papers'
# simulations, with their dependencies (memberlist, cilium/ebpf, gonum/plot)
# kept out of bin/vigil.
vigil-bench:
	$(GO) -C bench build -o ../bin/vigil-bench ./cmd/vigil-bench

# vigil with the RDMA transport (needs libibverbs-dev) and PMIx (libpmix-dev).
build-verbs:
	$(GO) build -tags pmix,verbs -o bin/vigil ./cmd/vigil

# The main job: 16 ranks over TCP on this machine, SIGKILL injection, and a
# timeline checked against Theorem 1 of seed 000.
demo:
	scripts/deps.sh core
	$(GO) build -o bin/vigil ./cmd/vigil
	bin/vigil demo

# The whole suite (what CI runs).
test:
	scripts/test.sh

unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v -e /cmd/vigil$$ -e /internal/docstest$$)
	$(GO) -C bench test -race -count=1 ./...

e2e:
	$(GO) test -count=1 -p 1 -v ./cmd/vigil/

# The README's quick starts, run as written (internal/docstest).
docs-test:
	$(GO) test -count=1 -timeout 10m -v ./internal/docstest/

fuzz:
	FUZZTIME=60s scripts/test.sh

# ibverbs tests for real: soft-RoCE in a qemu guest (see lab/rxe/README.md).
rxe-test:
	lab/rxe/run.sh

lint:
	gofmt -l . ; $(GO) vet ./... ; $(GO) vet -tags pmix,verbs ./... ; staticcheck ./... ; staticcheck -tags pmix,verbs ./...
	cd bench && $(GO) vet ./... && staticcheck ./...

# Go microbenchmarks of the hot paths (observer check, frames, overlays).
microbench:
	$(GO) test -run '^$$' -bench . -benchmem ./bcast/ ./transport/... ./internal/wire/

# Noise, accuracy, eBPF attribution and memberlist head-to-head (bench/, its
# own module; bin/vigil-bench runs bin/vigil's agents):
# the quick profile (about 9 min) regenerates bench/SUMMARY.md; the full one (about 55 min)
# regenerates bench/full/ (SUMMARY.md, CSV, PNG).
bench: vigil-bench
	scripts/deps.sh test
	$(GO) build -o bin/vigil ./cmd/vigil
	bin/vigil-bench quick -vigil bin/vigil -out bench/quick -summary bench/SUMMARY.md

bench-full: vigil-bench
	scripts/deps.sh test
	$(GO) build -o bin/vigil ./cmd/vigil
	bin/vigil-bench full -vigil bin/vigil -out bench/full

# The papers' large-scale results from the real cores (sim/RESULTS.md):
# every sweep at the sizes recorded there (about 30 min on 2 cores).
sim: vigil-bench
	bin/vigil-bench sim all -out sim/results

# Simulator throughput, 256k runs, memory per node.
bench-sim:
	$(GO) test -run '^$$' -bench . -benchtime 1x ./sim/

clean:
	rm -rf bin out

include mk/capi.mk
