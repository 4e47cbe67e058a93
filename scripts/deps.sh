#!/usr/bin/env bash
# Installs what Vigil's build and tests need on a fresh Debian 12 machine:
# Debian packages (only those missing), the Go modules, and staticcheck.
# Usage: scripts/deps.sh [core|test]   (default: test)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-test}

export PATH=/usr/local/go/bin:$HOME/go/bin:$PATH
command -v go >/dev/null || { echo "deps: Go is not installed at /usr/local/go" >&2; exit 1; }

pkgs=(gcc make)
if [[ $what == test ]]; then
	# cgo headers for the verbs package, mpirun + PMIx for the runtime tests,
	# qemu + soft-RoCE userspace for the RDMA harness (lab/rxe/run.sh); curl for
	# the README's metrics quick start (internal/docstest checks the list).
	pkgs+=(iproute2 libibverbs-dev rdma-core ibverbs-providers pkg-config openmpi-bin libopenmpi-dev libpmix-dev curl)
fi
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	echo "deps: installing ${missing[*]}"
	SUDO=; [[ $(id -u) == 0 ]] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

go mod download
go -C bench mod download # the benchmark harness's module
if [[ $what == test ]] && ! command -v staticcheck >/dev/null; then
	echo "deps: installing staticcheck"
	go install honnef.co/go/tools/cmd/staticcheck@v0.8.2 # staticcheck 2026.2.2
fi
