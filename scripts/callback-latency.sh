#!/bin/sh
# callback-latency.sh — libvigil's latency from learning a failure to the
# C failure callback, for two builds side by side: BEFORE (a commit) and
# the working tree, in interleaved rounds.
#
#   scripts/callback-latency.sh [BEFORE_COMMIT] [ROUNDS]
#
# Each round runs a job of 8 ranks of csrc/examples/explicit.c (ring mode)
# per build, compiled against it (h = 10
# ms, δ = 200 ms, loopback), kills ranks 7, 6 and 5 with SIGKILL one at a
# time, then makes the survivors leave one at a time (SIGTERM): every
# callback prints its latencies (det_ns, lat_ns: see explicit.c). It
# prints, per build, the number of callbacks and the minimum, median, 90th
# percentile and maximum in µs of:
#   own   from the detection to the callback at the rank that detected the
#         crash (the Core's time at detection: the event loop's wake-up
#         after the heartbeat thread's alarm)
#   all   from the detection to the callback at every survivor, crashes and
#         departures (one overlay hop or more for most)
#   deliv from delivered_mono_ns to the callback at every survivor: the
#         builds stamp it at different points (see docs/architecture.md)
set -eu
before=${1:-HEAD}
rounds=${2:-4}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d /tmp/vigil-cblat.XXXXXX)
pids=""
# The ranks of a round that stopped half-way (set -e) must not outlive it.
cleanup() {
	# shellcheck disable=SC2086
	[ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
	[ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
GO=${GO:-go}

build() { # build NAME SRCDIR
	mkdir -p "$tmp/$1"
	(cd "$2" && $GO build -buildmode=c-shared -o "$tmp/$1/libvigil.so" ./capi)
	cc -O2 -Wall -I"$root/csrc" -o "$tmp/$1/explicit" "$root/csrc/examples/explicit.c" \
		-L"$tmp/$1" -lvigil -Wl,-rpath,"$tmp/$1"
}
mkdir -p "$tmp/src-before"
git -C "$root" archive "$before" | tar -x -C "$tmp/src-before"
build before "$tmp/src-before"
build after "$root"

n=8
run() { # run NAME ROUND
	name=$1 round=$2
	dir=$tmp/$1-$2
	mkdir -p "$dir"
	base=$(( 20000 + ($(od -An -N2 -tu2 /dev/urandom) % 20000) ))
	addrs=""
	for r in $(seq 0 $((n - 1))); do addrs="$addrs 127.0.0.1:$((base + r))"; done
	job=$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n') # a job of its own (shared-memory names)
	pids=""
	for r in $(seq 0 $((n - 1))); do
		# shellcheck disable=SC2086
		"$tmp/$1/explicit" ring "$r" 10 200 "$job" 00112233445566778899aabbccddeeff $addrs \
			>"$dir/$r.out" 2>"$dir/$r.err" &
		pids="$pids $!"
	done
	set -- $pids
	for _ in $(seq 100); do
		[ "$(cat "$dir"/*.out | grep -c '"ready"')" -eq $n ] && break
		sleep 0.1
	done
	sleep 2.5 # past the start grace
	for r in 7 6 5; do
		eval "kill -9 \${$((r + 1))}" 2>/dev/null || true
		sleep 0.8
	done
	for r in 0 1 2 3 4; do
		eval "kill -TERM \${$((r + 1))}" 2>/dev/null || true
		sleep 0.4
	done
	sleep 0.5
	kill -9 $pids 2>/dev/null || true
	wait 2>/dev/null || true
	pids=""
	for r in $(seq 0 $((n - 1))); do
		sed -n 's/.*"ev":"dead","rank":\([0-9]*\),"dead":[0-9]*,"left":false,"detector":\1,"det_ns":\([0-9-]*\).*/\2/p' "$dir/$r.out"
	done >>"$tmp/$name.own"
	cat "$dir"/*.out | sed -n 's/.*"det_ns":\([0-9-]*\).*/\1/p' >>"$tmp/$name.all"
	cat "$dir"/*.out | sed -n 's/.*"lat_ns":\([0-9-]*\).*/\1/p' >>"$tmp/$name.deliv"
	echo "$name round $round: $(cat "$dir"/*.out | grep -c lat_ns) callbacks" >&2
}

for i in $(seq "$rounds"); do
	run before "$i"
	run after "$i"
done
for m in own all deliv; do
	for b in before after; do
		sort -n "$tmp/$b.$m" | awk -v b="$b" -v m="$m" '{v[NR]=$1} END {
			p = int(NR*0.9); if (p < 1) p = 1
			printf "%-5s %-6s callbacks=%d min=%.1fus median=%.1fus p90=%.1fus max=%.1fus\n", m, b, NR,
				v[1]/1e3, v[int((NR+1)/2)]/1e3, v[p]/1e3, v[NR]/1e3 }'
	done
done
