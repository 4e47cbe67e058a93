#!/usr/bin/env bash
# Bounded fuzzing of every decoder: each Fuzz target of every package of
# both modules (the library, ., and the benchmark harness, bench/) for
# $FUZZTIME (default 5s).
#
# A finding always fails the run: the fuzzer writes a reproducer under
# testdata/fuzz/<target>/, and it is re-run alone to confirm it; the output and
# the reproducer are printed. Go's fuzzing engine also fails now and then on
# its own, without a reproducer that fails ("context deadline exceeded" at the
# -fuzztime boundary, golang/go#51484; "fuzzing process hung or terminated
# unexpectedly", golang/go#56238 and #52569). Such a run is reported as an
# engine failure with its output and retried once; a second failure of the
# same target fails the run.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$HOME/go/bin:$PATH
FUZZTIME=${FUZZTIME:-5s}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# fuzz_once MOD PKG DIR TARGET: 0 when clean, 1 on a confirmed finding, 2 on
# an engine failure (nothing reproducible). go runs in MOD, PKG's module.
fuzz_once() {
	local mod=$1
	shift
	local pkg=$1 dir=$2 fz=$3 corpus="$2/testdata/fuzz/$3"
	local before after new
	before=$(ls "$corpus" 2>/dev/null | sort)
	if go -C "$mod" test -run '^$' -fuzz "^${fz}\$" -fuzztime "$FUZZTIME" "$pkg" >"$log" 2>&1; then
		return 0
	fi
	echo "fuzz $pkg $fz: go test failed; its output:" >&2
	tail -n 40 "$log" >&2
	after=$(ls "$corpus" 2>/dev/null | sort)
	new=$(comm -13 <(echo "$before") <(echo "$after") | grep -v '^$' || true)
	for f in $new; do
		echo "reproducer $corpus/$f:" >&2
		head -c 2000 "$corpus/$f" >&2
		if ! go -C "$mod" test -count=1 -run "^${fz}/${f}\$" "$pkg" >"$log" 2>&1; then
			tail -n 40 "$log" >&2
			echo "fuzz $pkg $fz: FAILED on $corpus/$f (kept for the fix)" >&2
			return 1
		fi
		echo "fuzz $pkg $fz: the reproducer passes when re-run alone: an engine failure; removed" >&2
		rm -f "$corpus/$f"
	done
	return 2
}

status=0
for mod in . bench; do
for pkg in $(go -C "$mod" list ./...); do
	dir=$(go -C "$mod" list -f '{{.Dir}}' "$pkg")
	for fz in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
		fuzz_once "$mod" "$pkg" "$dir" "$fz"
		rc=$?
		if [[ $rc == 2 ]]; then
			echo "fuzz $pkg $fz: engine failure without a finding; retrying once" >&2
			fuzz_once "$mod" "$pkg" "$dir" "$fz"
			rc=$?
		fi
		case $rc in
		0) echo "fuzz $pkg $fz: ok" ;;
		*) echo "fuzz $pkg $fz: FAILED"; status=1 ;;
		esac
	done
done
done
exit $status
