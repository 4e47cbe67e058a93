#!/usr/bin/env bash
# Vigil's whole test suite: formatting, vet, staticcheck, unit and property
# tests with -race, bounded fuzzing of every decoder, and the multi-process
# tests (real processes over TCP, kill -9, SIGSTOP, CPU burners).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$HOME/go/bin:$PATH
scripts/deps.sh test
# stage NAME: a stage header with the seconds elapsed, to see where CI time goes.
stage() { echo "== $* (at ${SECONDS}s)"; }

stage "gofmt"
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [[ -n $bad ]]; then echo "gofmt: not formatted: $bad" >&2; exit 1; fi
# Two modules: the library and product (.) and the benchmark harness
# (bench/, its own go.mod so that its dependencies stay out of bin/vigil).
stage "go vet (untagged and -tags pmix,verbs; bench module)"
go vet ./...
go vet -tags pmix,verbs ./...
(cd bench && go vet ./...)
stage "staticcheck (untagged and -tags pmix,verbs; bench module)"
staticcheck ./...
staticcheck -tags pmix,verbs ./...
(cd bench && staticcheck ./...)

# Unit, property and in-process cluster tests under the race detector. The
# multi-process package runs alone afterwards so that its timing-sensitive
# failure-free runs do not share the two cores with the rest, and so does the
# docs test (internal/docstest), which runs the README's quick starts.
unit=$(go list ./... | grep -v -e '/cmd/vigil$' -e '/internal/docstest$')
stage "unit tests (-race)"
go test -race -count=1 -timeout 20m $unit
stage "bench module tests (-race; the simulator's studies without it)"
# TestSimQuick runs every simulator study once (CPU-bound, 200 s under the
# race detector); the simulator's concurrency is tested under -race in the
# unit stage (sim), so the studies' results are checked without it here.
(cd bench && go test -race -count=1 -timeout 20m -skip '^TestSimQuick$' ./... &&
	go test -count=1 -timeout 20m -run '^TestSimQuick$' ./cmd/vigil-bench/)
# From here on the multi-host tests (network-namespace hosts under mpirun)
# fail rather than skip when they cannot run (not root, no ip netns).
export VIGIL_REQUIRE_HOSTS=1
stage "PMIx bootstrap under mpirun (-tags pmix), the test launcher's hosts"
go test -count=1 -tags pmix -timeout 10m ./bootstrap/pmix/... ./lab/mpitest/
stage "C ABI: libvigil, C examples, PMPI library"
make -s libvigil c-examples pmpi pmix-bridge >/dev/null

stage "the README's quick starts, as written (internal/docstest)"
# Every sh block of README.md, in order, in a copy of this tree: C and Go
# under mpirun with a rank killed, across four network-namespace hosts with
# a host killed, the daemons, the metrics (docs/testing.md).
go test -count=1 -timeout 10m -v ./internal/docstest/

stage "fuzzing every decoder (${FUZZTIME:=3s} each)"
FUZZTIME=$FUZZTIME scripts/fuzz.sh

stage "ibverbs on soft-RoCE (rdma_rxe) in a qemu guest"
# Two runs of each guest benchmark keep the suite well under 30 minutes; the
# RXE-BENCH/RXE-RATIO lines still compare sides measured in the same run
# (`make rxe` keeps three).
RXE_BENCHCOUNT=${RXE_BENCHCOUNT:-2} lab/rxe/run.sh

stage "multi-process tests"
go test -count=1 -p 1 -timeout 20m -v ./cmd/vigil/ 2>&1 | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|e2e_test.go:[0-9]+: [^a]' 
exit "${PIPESTATUS[0]}"
