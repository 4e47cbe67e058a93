#!/bin/sh
# bench-pair.sh — one Go benchmark of two builds side by side: BEFORE (a
# commit) and the working tree, in interleaved rounds (the order alternates
# from round to round), on a shared, noisy machine.
#
#   scripts/bench-pair.sh BEFORE PKG BENCH [ROUNDS] [BENCHTIME] [METRIC] [FILES]
#
# PKG is a package directory (./detector), BENCH a -test.bench pattern,
# ROUNDS (default 5) the rounds, BENCHTIME (default 200ms) each run's
# -test.benchtime, METRIC (default ns/op) the unit compared. FILES (default
# none), files of PKG copied from the working tree into BEFORE's, names the
# benchmark's own file when BEFORE predates it. The runs use one CPU
# (-test.cpu 1). It prints, per benchmark, the median and range of METRIC
# over the rounds for each build and the ratio of the medians, BEFORE over
# the working tree (> 1: the working tree is faster).
set -eu
[ $# -ge 3 ] || { sed -n '2,16p' "$0"; exit 2; }
before=$1 pkg=$2 bench=$3 rounds=${4:-5} benchtime=${5:-200ms} metric=${6:-ns/op} files=${7:-}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d /tmp/vigil-benchpair.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/before"
git -C "$root" archive "$before" | tar -x -C "$tmp/before"
for f in $files; do cp "$root/$pkg/$f" "$tmp/before/$pkg/$f"; done
(cd "$tmp/before" && go test -c -o "$tmp/before.test" "$pkg")
(cd "$root" && go test -c -o "$tmp/after.test" "$pkg")
round=1
while [ "$round" -le "$rounds" ]; do
	if [ $((round % 2)) -eq 1 ]; then order="before after"; else order="after before"; fi
	for b in $order; do
		(cd "$root/$pkg" && "$tmp/$b.test" -test.run '^$' -test.bench "$bench" -test.benchtime "$benchtime" -test.cpu 1) |
			awk -v b="$b" -v m="$metric" '/^Benchmark/ { for (i = 3; i < NF; i++) if ($(i+1) == m) print b, $1, $i }' >>"$tmp/runs"
	done
	round=$((round + 1))
done
echo "$metric, $rounds interleaved rounds: median (min–max); before = $before, after = working tree"
sort -k2,2 -k1,1 -k3,3g "$tmp/runs" | awk '
	function flush() {
		if (name == "") return
		printf "%-50s before %10.1f (%.1f–%.1f)  after %10.1f (%.1f–%.1f)  before/after %.2f\n",
			name, med["before"], lo["before"], hi["before"], med["after"], lo["after"], hi["after"], med["before"] / med["after"]
	}
	function done_build() {
		if (cur == "") return
		med[cur] = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
		lo[cur] = v[1]; hi[cur] = v[n]
	}
	{
		if ($2 != name) { done_build(); flush(); name = $2; cur = ""; delete med }
		if ($1 != cur) { done_build(); cur = $1; n = 0 }
		v[++n] = $3
	}
	END { done_build(); flush() }'
