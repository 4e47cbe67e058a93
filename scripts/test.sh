#!/usr/bin/env bash
# Vigil's whole test suite: formatting, vet, staticcheck, unit and property
# tests with -race, bounded fuzzing of every decoder, and the multi-process
# tests (real processes over TCP, kill -9, SIGSTOP, CPU burners).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$HOME/go/bin:$PATH
scripts/deps.sh test

echo "== gofmt"
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [[ -n $bad ]]; then echo "gofmt: not formatted: $bad" >&2; exit 1; fi
# Two modules: the library and product (.) and the benchmark harness
# (bench/, its own go.mod so that its dependencies stay out of bin/vigil).
echo "== go vet (untagged and -tags pmix,verbs; bench module)"
go vet ./...
go vet -tags pmix,verbs ./...
(cd bench && go vet ./...)
echo "== staticcheck (untagged and -tags pmix,verbs; bench module)"
staticcheck ./...
staticcheck -tags pmix,verbs ./...
(cd bench && staticcheck ./...)

# Unit, property and in-process cluster tests under the race detector. The
# multi-process package runs alone afterwards so that its timing-sensitive
# failure-free runs do not share the two cores with the rest.
unit=$(go list ./... | grep -v '/cmd/vigil$')
echo "== unit tests (-race)"
go test -race -count=1 -timeout 20m $unit
echo "== bench module tests (-race)"
(cd bench && go test -race -count=1 -timeout 20m ./...)
# From here on the multi-host tests (network-namespace hosts under mpirun)
# fail rather than skip when they cannot run (not root, no ip netns).
export VIGIL_REQUIRE_HOSTS=1
echo "== PMIx bootstrap under mpirun (-tags pmix)"
go test -count=1 -tags pmix -timeout 10m ./bootstrap/pmix/...
echo "== C ABI: libvigil, C examples, PMPI library"
make -s libvigil c-examples pmpi pmix-bridge >/dev/null

echo "== fuzzing every decoder (${FUZZTIME:=5s} each)"
FUZZTIME=$FUZZTIME scripts/fuzz.sh

echo "== ibverbs on soft-RoCE (rdma_rxe) in a qemu guest"
rxe/run.sh

echo "== multi-process tests"
go test -count=1 -p 1 -timeout 20m -v ./cmd/vigil/ 2>&1 | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|e2e_test.go:[0-9]+: [^a]' 
exit "${PIPESTATUS[0]}"
