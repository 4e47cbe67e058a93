#!/bin/sh
# /init of the rxe test guest (busybox ash). lab/rxe/run.sh copies it into the
# initramfs. It loads the soft-RoCE modules, creates rxe0 on a veth pair, runs
# every test listed in /etc/rxe/tests and prints one machine-readable line per
# test:
#
#   RXE-RESULT name=<test> status=pass|fail|skip dur_ms=<n>
#   RXE-BENCH name=<bench> ns_op=<x> [b_op=<n> allocs_op=<n>]
#   RXE-DONE
#
# then powers the guest off. Parameters come from the kernel command line:
#   vigil.run=REGEX        -test.run for Go test binaries (default .)
#   vigil.bench=REGEX      -test.bench for Go test binaries (default .; "none" skips)
#   vigil.benchtime=D      -test.benchtime (default 1s)
#   vigil.benchcount=N     runs of each benchmark and of the C loop (default 3)
#   vigil.only=a,b         run only these manifest entries (default all)
#   vigil.goflags=f1,f2    extra flags for Go test binaries (commas become
#                          spaces: vigil.goflags=-test.cpu=1,-test.count=3)
#   vigil.goenv=A=1,B=2    extra environment for Go test binaries
#   vigil.role=a|b|c       multi-guest run: rxe0 on eth0, run /tests/twoguest only
#   vigil.guests=2|3       guests in that run (default 2); the last one is the victim
export PATH=/usr/sbin:/usr/bin
export HOME=/root
umask 022

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mkdir -p /root

now_ms() { awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime; }
fatal() {
	echo "RXE-FATAL $*"
	echo "RXE-DONE"
	poweroff -f
	sleep 10
}
param() {
	for w in $(cat /proc/cmdline); do
		case "$w" in "$1"=*) echo "${w#*=}"; return ;; esac
	done
	echo "$2"
}
result() { echo "RXE-RESULT name=$1 status=$2 dur_ms=$3"; }

RUN=$(param vigil.run .)
BENCH=$(param vigil.bench .)
BENCHTIME=$(param vigil.benchtime 1s)
BENCHCOUNT=$(param vigil.benchcount 3)
ONLY=$(param vigil.only all)
GOFLAGS_EXTRA=$(param vigil.goflags "" | tr ',' ' ')
GOENV_EXTRA=$(param vigil.goenv "" | tr ',' ' ')
[ "$BENCH" = none ] && BENCH='^$'

t0=$(now_ms)
echo "RXE-INFO stage=init uptime_ms=$t0 kernel=$(uname -r)"

# Modules, in the order lab/rxe/run.sh computed (crc32_generic first: rxe needs
# it to init its crc32 but modules.dep does not say so).
while read -r m; do
	[ -n "$m" ] || continue
	insmod "/lib/modules/rxe/$m" || fatal "insmod $m"
done </etc/rxe/modules

# busybox ash prefers its own ip applet: call iproute2's by path.
IP=/usr/sbin/ip
$IP link set lo up || fatal "lo up"
ROLE=$(param vigil.role "")
GUESTS=$(param vigil.guests 2)
if [ -n "$ROLE" ]; then
	# Multi-guest run: rxe0 on the virtio NIC joined to the other guests.
	NETDEV=eth0
	case "$ROLE" in a) ADDR=10.98.0.1 ;; b) ADDR=10.98.0.2 ;; c) ADDR=10.98.0.3 ;; *) fatal "vigil.role=$ROLE" ;; esac
	i=0
	until [ -e /sys/class/net/eth0 ]; do
		i=$((i + 1))
		[ $i -gt 50 ] && fatal "no eth0"
		sleep 0.1
	done
	$IP addr add $ADDR/24 dev eth0 || fatal "addr eth0"
	$IP link set eth0 up || fatal "eth0 up"
else
	NETDEV=veth0
	$IP link add veth0 type veth peer name veth1 || fatal "veth add"
	$IP addr add 10.99.0.1/24 dev veth0 || fatal "addr veth0"
	$IP addr add 10.99.0.2/24 dev veth1 || fatal "addr veth1"
	$IP link set veth0 up || fatal "veth0 up"
	$IP link set veth1 up || fatal "veth1 up"
fi
rdma link add rxe0 type rxe netdev $NETDEV || fatal "rdma link add rxe0"

# Wait for the port to become ACTIVE (carrier on veth0).
i=0
until grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null; do
	i=$((i + 1))
	[ $i -gt 100 ] && fatal "rxe0 port 1 not ACTIVE: $(cat /sys/class/infiniband/rxe0/ports/1/state 2>&1)"
	sleep 0.1
done
echo "RXE-INFO stage=rxe-ready uptime_ms=$(now_ms) setup_ms=$(($(now_ms) - t0))"

export VIGIL_RXE_GUEST=1 VIGIL_RXE_DEV=rxe0 VIGIL_RXE_NETDEV=$NETDEV
# tverbs/BenchmarkHeartbeatVsC runs the stand-alone C loop between its rounds.
[ -x /tests/hbwrite ] && export VIGIL_HBWRITE=/tests/hbwrite

if [ -n "$ROLE" ]; then
	# The multi-guest job: the last guest (b of two, c of three) never
	# returns (the host powers it off); its output goes straight to the
	# console, where the host waits for RXE-TWOGUEST-READY.
	case "$GUESTS$ROLE" in 2b | 3c) exec /tests/twoguest -guests "$GUESTS" -role "$ROLE" </dev/null ;; esac
	s=$(now_ms)
	(
		/tests/twoguest -guests "$GUESTS" -role "$ROLE" </dev/null 2>&1
		echo "RXE-EXIT $?"
	) | tee /tmp/twoguest.log | sed "s/^/[twoguest] /"
	if [ "$(sed -n 's/^RXE-EXIT //p' /tmp/twoguest.log)" = 0 ]; then st=pass; else st=fail; fi
	grep -E '^RXE-(INFO|BENCH) ' /tmp/twoguest.log
	name=twoguest
	[ "$GUESTS" = 3 ] && name=threeguest-$ROLE
	result "$name" "$st" $(($(now_ms) - s))
	echo "RXE-DONE"
	poweroff -f
	sleep 10
fi

selected() {
	[ "$ONLY" = all ] && return 0
	case ",$ONLY," in *",$1,"*) return 0 ;; esac
	return 1
}

# run_plain NAME CMD...: a script or program; exit status 0 = pass. Its own
# RXE-BENCH / RXE-INFO lines pass through.
run_plain() {
	name=$1
	shift
	s=$(now_ms)
	if "$@" </dev/null >/tmp/$name.log 2>&1; then st=pass; else st=fail; fi
	sed "s/^/[$name] /" /tmp/$name.log
	grep -E '^RXE-(BENCH|INFO) ' /tmp/$name.log
	result "$name" "$st" $(($(now_ms) - s))
}

# run_go NAME BINARY MODE [PREFIX]: a Go test binary built with go test -c,
# MODE test (tests only) or bench (benchmarks only, BENCHCOUNT runs). One
# result line per test and subtest (from -test.v output), one bench line per
# benchmark run, named PREFIX/Benchmark..., and one line for the run as a
# whole.
run_go() {
	name=$1
	bin=$2
	pfx=${4:-$name}
	if [ "$3" = bench ]; then
		set -- -test.run '^$' -test.bench "$BENCH" -test.benchtime "$BENCHTIME" -test.count "$BENCHCOUNT"
	else
		set -- -test.run "$RUN" -test.bench '^$'
	fi
	s=$(now_ms)
	(
		env $GOENV_EXTRA "$bin" -test.v "$@" -test.benchmem -test.timeout 300s $GOFLAGS_EXTRA </dev/null 2>&1
		echo "RXE-EXIT $?"
	) | tee /tmp/$name.log | sed "s/^/[$name] /"
	rc=$(sed -n 's/^RXE-EXIT //p' /tmp/$name.log)
	# A CPU profile asked for with RXE_GOFLAGS=-test.cpuprofile=/tmp/cpu.prof
	# leaves on the console as base64 lines (lab/rxe/run.sh writes it to
	# .rxe/NAME.cpu.prof).
	if [ -s /tmp/cpu.prof ]; then
		base64 /tmp/cpu.prof | sed "s/^/RXE-PROF $name /"
		rm -f /tmp/cpu.prof
	fi
	awk -v pfx="$pfx" '
		/^ *--- (PASS|FAIL|SKIP): / {
			st = tolower($2); sub(":", "", st)
			d = $4; gsub(/[()s]/, "", d)
			printf "RXE-RESULT name=%s/%s status=%s dur_ms=%d\n", pfx, $3, st, d * 1000
		}
		/^Benchmark[^ \t]+[ \t]+[0-9]+[ \t]+[0-9.]+ ns\/op/ {
			n = $1; sub(/-[0-9]+$/, "", n)
			line = sprintf("RXE-BENCH name=%s/%s iters=%s ns_op=%s", pfx, n, $2, $3)
			for (i = 5; i <= NF; i++) {
				if ($i == "B/op") line = line " b_op=" $(i - 1)
				if ($i == "allocs/op") line = line " allocs_op=" $(i - 1)
				if ($i ~ /^[a-z_][a-z0-9_]*$/ && $(i - 1) ~ /^[0-9.]+$/) line = line " " $i "=" $(i - 1)
			}
			print line
		}' /tmp/$name.log
	if [ "$rc" = 0 ]; then st=pass; else st=fail; fi
	result "$name" "$st" $(($(now_ms) - s))
}

while read -r kind name path args; do
	case "$kind" in '' | '#'*) continue ;; esac
	selected "$name" || continue
	case "$kind" in
	go) run_go "$name" "$path" test ;;
	gobench)
		[ "$BENCH" = '^$' ] && continue
		run_go "$name" "$path" bench $args
		;;
	sh) run_plain "$name" /bin/sh "$path" $args ;;
	bin)
		# BENCHSECS/BENCHCOUNT in args: the Go benchmark's -test.benchtime
		# (when given in seconds) and run count.
		secs=$(echo "$BENCHTIME" | sed -n 's/^\([0-9.]*\)s$/\1/p')
		run_plain "$name" "$path" $(echo "$args" | sed "s/BENCHCOUNT/$BENCHCOUNT/; s/BENCHSECS/${secs:-1}/")
		;;
	*) echo "RXE-FATAL unknown test kind $kind" ;;
	esac
done </etc/rxe/tests

echo "RXE-INFO stage=done uptime_ms=$(now_ms) tests_ms=$(($(now_ms) - t0))"
echo "RXE-DONE"
sync
poweroff -f
sleep 10
