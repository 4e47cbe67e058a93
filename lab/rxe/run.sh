#!/usr/bin/env bash
# lab/rxe/run.sh: run Vigil's ibverbs tests for real on soft-RoCE (rdma_rxe) in a
# qemu guest under TCG emulation. Needs no KVM, no RDMA hardware and no host
# kernel module: the guest runs Debian's generic kernel, whose rdma_rxe gives
# a real verbs device (rxe0 on a veth pair) to real libibverbs.
#
# What it does, on a Debian 12 machine (root for the first run's apt-get):
#   1. installs the Debian packages it needs, only those missing;
#   2. fetches the current generic kernel package (apt-get download; the name
#      is resolved from linux-image-amd64, never pinned) into .rxe/;
#   3. builds the test binaries statically with cgo (go test -c ./verbs, the
#      C loop lab/rxe/hbwrite.c, the C message ping-pong lab/rxe/udlat.c, the C
#      one-post-at-a-time lab/rxe/rcpost.c);
#   4. builds an initramfs: busybox, the rxe modules, rdma/ip/perftest tools
#      with their libraries, lab/rxe/init.sh as /init;
#   5. boots qemu (-accel tcg) under timeout and parses the serial console:
#      one "RXE-RESULT name=... status=pass|fail dur_ms=..." line per test.
# It exits non-zero on any failed, skipped or missing result.
#
# Usage: lab/rxe/run.sh                 (from anywhere; state lives in <repo>/.rxe)
# Environment:
#   RXE_RUN=REGEX        Go -test.run (default .)
#   RXE_BENCH=REGEX      Go -test.bench (default .; "none" runs no benchmark)
#   RXE_BENCHTIME=D      Go -test.benchtime (default 1s)
#   RXE_ONLY=a,b         run only these manifest entries (smoke-devinfo,
#                        smoke-write-lat, smoke-send-lat, smoke-send-lat-large,
#                        verbs, verbs-bench,
#                        tverbs, tverbs-bench, detector, c-hbwrite, c-udlat, c-rcpost,
#                        twoguest, threeguest; default all)
#   RXE_BENCHCOUNT=N     runs of each benchmark and of the C loop (default 3)
#   RXE_GOFLAGS=f1,f2    extra Go test flags, comma-separated
#                        (e.g. -test.cpu=1,-test.count=3)
#   RXE_GOENV=A=1,B=2    extra environment for Go test binaries
#   RXE_TIMEOUT=SEC      wall-clock limit for the guest (default 900)
#   RXE_VERBOSE=1        echo the whole serial console, not only RXE- lines
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CACHE=${RXE_CACHE:-$ROOT/.rxe}
RUN=${RXE_RUN:-.}
BENCH=${RXE_BENCH:-.}
BENCHTIME=${RXE_BENCHTIME:-1s}
BENCHCOUNT=${RXE_BENCHCOUNT:-3}
ONLY=${RXE_ONLY:-all}
TIMEOUT=${RXE_TIMEOUT:-900}
VERBOSE=${RXE_VERBOSE:-0}
GOFLAGS_EXTRA=${RXE_GOFLAGS:-}
GOENV_EXTRA=${RXE_GOENV:-}
[[ $RUN$BENCH$BENCHTIME$BENCHCOUNT$ONLY$GOFLAGS_EXTRA$GOENV_EXTRA == *[[:space:]]* ]] && {
	echo "rxe: RXE_* parameters go on the kernel command line: no spaces" >&2
	exit 2
}

PKGS=(qemu-system-x86 busybox-static rdma-core ibverbs-utils ibverbs-providers
	libibverbs-dev perftest iproute2 cpio gcc libc6-dev gzip xz-utils)
export PATH=/usr/local/go/bin:$PATH

# Kernel modules in load order. crc32_generic is not in modules.dep, but rxe
# needs it ("failed to init crc32 algorithm err:-2" without it).
MODULES=(crc32_generic ib_core ib_uverbs udp_tunnel ip6_udp_tunnel rdma_rxe veth
	virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci failover net_failover virtio_net)

# Static cgo link of a libibverbs program: the rxe provider is linked in whole
# (it registers itself from a constructor), so no provider .so or driver file
# is needed in the guest.
STATIC_EXTLDFLAGS='-static -Wl,--whole-archive -lrxe-rdmav34 -Wl,--no-whole-archive -libverbs -lnl-route-3 -lnl-3 -lpthread'

T_START=$(date +%s%N)
log() { printf 'rxe: %s\n' "$*" >&2; }
die() {
	log "ERROR: $*"
	exit 1
}
elapsed() { echo $((($(date +%s%N) - T_START) / 1000000)); }

ensure_packages() {
	local need=() p
	for p in "${PKGS[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
	done
	((${#need[@]} == 0)) && return 0
	[[ $(id -u) == 0 ]] || die "missing packages (${need[*]}): run as root or apt-get install them"
	log "installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "${need[@]}" >/dev/null
}

# resolve_kernel prints the generic kernel package linux-image-amd64 depends on.
resolve_kernel() {
	apt-cache depends linux-image-amd64 2>/dev/null |
		awk '/Depends: linux-image-[0-9].*-amd64$/ { print $2; exit }'
}

# fetch_kernel sets KDIR (the kernel and the modules this harness loads,
# extracted from the package) and KVER. The .deb stays in the cache.
fetch_kernel() {
	local name deb
	name=$(resolve_kernel)
	if [[ -z $name ]] && [[ $(id -u) == 0 ]]; then
		apt-get update -qq
		name=$(resolve_kernel)
	fi
	if [[ -z $name ]]; then
		# Offline and no package lists: use what the cache has.
		name=$(find "$CACHE" -maxdepth 1 -name 'linux-image-*-amd64_*.deb' -printf '%f\n' 2>/dev/null |
			sed 's/_.*//' | sort -V | tail -1)
		[[ -n $name ]] || die "cannot resolve the kernel package from linux-image-amd64 (apt-get update?)"
		log "using cached $name"
	fi
	[[ $name == *-cloud-amd64 ]] && die "$name: the cloud flavour has no CONFIG_RDMA_RXE"
	KDIR=$CACHE/$name
	KVER=${name#linux-image-}
	deb=$(find "$CACHE" -maxdepth 1 -name "${name}_*_amd64.deb" | sort -V | tail -1)
	if [[ -z $deb ]]; then
		log "downloading $name"
		local tmp
		tmp=$(mktemp -d "$CACHE/dl.XXXXXX")
		chmod 777 "$tmp" # apt's _apt sandbox user writes there
		if ! (cd "$tmp" && apt-get download -qq "$name"); then
			[[ $(id -u) == 0 ]] && apt-get update -qq
			(cd "$tmp" && apt-get download -qq "$name") || die "apt-get download $name failed"
		fi
		mv "$tmp"/*.deb "$CACHE"/
		rmdir "$tmp"
		deb=$(find "$CACHE" -maxdepth 1 -name "${name}_*_amd64.deb" | sort -V | tail -1)
		rm -rf "$KDIR"
	fi
	local m need=0
	[[ -f $KDIR/boot/vmlinuz-$KVER ]] || need=1
	for m in "${MODULES[@]}"; do
		[[ -n $(find "$KDIR/lib/modules" \( -name "$m.ko" -o -name "$m.ko.xz" \) 2>/dev/null) ]] || need=1
	done
	if ((need)); then
		local pats=("./boot/vmlinuz-$KVER" "./boot/config-$KVER")
		for m in "${MODULES[@]}"; do pats+=("*/$m.ko" "*/$m.ko.xz"); done
		rm -rf "$KDIR.tmp"
		mkdir -p "$KDIR.tmp"
		# Missing patterns (.ko vs .ko.xz) are fine: tar lists them and goes on.
		dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$KDIR.tmp" --wildcards "${pats[@]}" 2>/dev/null || true
		rm -rf "$KDIR"
		mv "$KDIR.tmp" "$KDIR"
	fi
	[[ -f $KDIR/boot/vmlinuz-$KVER ]] || die "no vmlinuz-$KVER in $deb"
	grep -q '^CONFIG_RDMA_RXE=m' "$KDIR/boot/config-$KVER" || die "$KVER: CONFIG_RDMA_RXE is not a module"
}

# copy_with_libs STAGE FILE...: copy programs to the same path in STAGE with
# every shared library ldd names (merged-usr layout).
copy_with_libs() {
	local stage=$1 f lib
	shift
	for f in "$@"; do
		install -D -m 755 "$f" "$stage/usr/${f#/usr/}"
		ldd "$f" 2>/dev/null | awk '/=> \// { print $3 } /^\t\/[^ ]+ \(/ { print $1 }' | while read -r lib; do
			local dst=$stage/usr/${lib#/usr/}
			[[ -e $dst ]] || install -D -m 755 "$(readlink -f "$lib")" "$dst"
		done
	done
}

# GO_TESTS: manifest entry name, test binary, package.
GO_TESTS=("verbs verbs.test ./verbs" "tverbs tverbs.test ./transport/verbs")

build_go_tests() {
	local out=$1 e name bin pkg
	for e in "${GO_TESTS[@]}"; do
		read -r name bin pkg <<<"$e"
		sel "$name" || sel "$name-bench" || continue
		log "building $bin (static, cgo)"
		# The static link warns about getaddrinfo in libnl: shown only on failure.
		if ! (cd "$ROOT" && CGO_ENABLED=1 go test -c -o "$out/$bin" \
			-ldflags "-linkmode external -extldflags '$STATIC_EXTLDFLAGS'" "$pkg") >"$CACHE/build.log" 2>&1; then
			cat "$CACHE/build.log" >&2
			die "go test -c $pkg failed"
		fi
	done
	if sel twoguest || sel threeguest; then
		log "building twoguest (static, cgo)"
		if ! (cd "$ROOT" && CGO_ENABLED=1 go build -tags verbs -o "$out/twoguest" \
			-ldflags "-linkmode external -extldflags '$STATIC_EXTLDFLAGS'" ./lab/rxe/twoguest) >"$CACHE/build.log" 2>&1; then
			cat "$CACHE/build.log" >&2
			die "go build ./lab/rxe/twoguest failed"
		fi
	fi
	if sel threeguest; then
		log "building hub (host side)"
		(cd "$ROOT" && go build -o "$CACHE/hub" ./lab/rxe/hub) || die "go build ./lab/rxe/hub failed" # not for the guest
	fi
	if sel detector; then
		log "building vigil (static, cgo)"
		if ! (cd "$ROOT" && CGO_ENABLED=1 go build -tags verbs -o "$out/vigil" \
			-ldflags "-linkmode external -extldflags '$STATIC_EXTLDFLAGS'" ./cmd/vigil) >"$CACHE/build.log" 2>&1; then
			cat "$CACHE/build.log" >&2
			die "go build ./cmd/vigil failed"
		fi
	fi
}

# sel NAME: is manifest entry NAME selected by RXE_ONLY?
sel() { [[ $ONLY == all || ",$ONLY," == *",$1,"* ]]; }

build_c_loop() {
	local out=$1
	log "building hbwrite, udlat, rcpost and tsc (static C)"
	# shellcheck disable=SC2086
	if ! gcc -O2 -Wall -Werror -o "$out/hbwrite" "$HERE/hbwrite.c" $STATIC_EXTLDFLAGS >"$CACHE/build-c.log" 2>&1 ||
		! gcc -O2 -Wall -Werror -o "$out/udlat" "$HERE/udlat.c" $STATIC_EXTLDFLAGS >>"$CACHE/build-c.log" 2>&1 ||
		! gcc -O2 -Wall -Werror -o "$out/rcpost" "$HERE/rcpost.c" $STATIC_EXTLDFLAGS >>"$CACHE/build-c.log" 2>&1 ||
		! gcc -O2 -Wall -Werror -static -o "$out/tsc" "$HERE/tsc.c" >>"$CACHE/build-c.log" 2>&1; then
		cat "$CACHE/build-c.log" >&2
		die "gcc failed"
	fi
}

find_module() {
	local m=$1 f
	f=$(find "$KDIR/lib/modules" \( -name "$m.ko" -o -name "$m.ko.xz" \) | head -1)
	[[ -n $f ]] || die "module $m not found in $KVER"
	echo "$f"
}

build_initramfs() {
	local stage=$CACHE/stage bins=$CACHE/bin m f deps d seen=" "
	rm -rf "$stage"
	mkdir -p "$stage"/{usr/bin,usr/sbin,usr/lib64,usr/lib/x86_64-linux-gnu,proc,sys,dev,tmp,etc/rxe,tests}
	# merged-usr
	ln -s usr/bin "$stage/bin"
	ln -s usr/sbin "$stage/sbin"
	ln -s usr/lib "$stage/lib"
	ln -s usr/lib64 "$stage/lib64"

	install -m 755 /usr/bin/busybox "$stage/usr/bin/busybox"
	for a in $(/usr/bin/busybox --list); do
		[[ -e $stage/usr/bin/$a ]] || ln -s busybox "$stage/usr/bin/$a"
	done

	# Modules in order; check each one's depends= against what came before.
	mkdir -p "$stage/usr/lib/modules/rxe"
	: >"$stage/etc/rxe/modules"
	for m in "${MODULES[@]}"; do
		f=$(find_module "$m")
		deps=$(grep -a -o 'depends=[^[:cntrl:]]*' "$f" | head -1 | cut -d= -f2 | tr ',' ' ')
		for d in $deps; do
			[[ $seen == *" $d "* ]] || die "module order: $m needs $d first"
		done
		seen+="$m "
		if [[ $f == *.xz ]]; then
			xz -dc "$f" >"$stage/usr/lib/modules/rxe/$m.ko"
		else
			cp "$f" "$stage/usr/lib/modules/rxe/$m.ko"
		fi
		echo "$m.ko" >>"$stage/etc/rxe/modules"
	done

	# Tools (dynamic) with their libraries, and the rxe provider for them.
	rm -f "$stage/usr/bin/ip" "$stage/usr/sbin/ip"
	copy_with_libs "$stage" /usr/sbin/ip /usr/bin/rdma /usr/bin/ibv_devinfo /usr/bin/ib_write_lat /usr/bin/ib_send_lat
	copy_with_libs "$stage" /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
	install -D -m 644 /etc/libibverbs.d/rxe.driver "$stage/etc/libibverbs.d/rxe.driver"

	install -m 755 "$HERE/init.sh" "$stage/init"
	install -m 755 "$HERE/smoke.sh" "$stage/tests/smoke.sh"
	{
		echo "# kind name path args"
		echo "sh smoke-devinfo /tests/smoke.sh devinfo"
		echo "sh smoke-write-lat /tests/smoke.sh write-lat"
		echo "sh smoke-send-lat /tests/smoke.sh send-lat"
		echo "sh smoke-send-lat-large /tests/smoke.sh send-lat-large"
		if [[ -x $bins/verbs.test ]]; then
			echo "go verbs /tests/verbs.test"
			echo "gobench verbs-bench /tests/verbs.test verbs"
		fi
		if [[ -x $bins/tverbs.test ]]; then
			echo "go tverbs /tests/tverbs.test"
			echo "gobench tverbs-bench /tests/tverbs.test tverbs"
		fi
		[[ -x $bins/vigil ]] && echo "sh detector /tests/detector.sh 8"
		[[ -x $bins/hbwrite ]] && echo "bin c-hbwrite /tests/hbwrite rxe0 BENCHSECS BENCHCOUNT"
		if [[ -x $bins/udlat ]]; then echo "bin c-udlat /tests/udlat rxe0 BENCHCOUNT"; fi
		if [[ -x $bins/rcpost ]]; then echo "bin c-rcpost /tests/rcpost rxe0"; fi
	} >"$stage/etc/rxe/tests"
	install -m 755 "$HERE/detector.sh" "$stage/tests/detector.sh"
	for f in "$bins"/*; do [[ -f $f ]] && install -m 755 "$f" "$stage/tests/"; done

	(cd "$stage" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet) | gzip -1 >"$CACHE/initrd.gz"
	log "initramfs $(du -h "$CACHE/initrd.gz" | cut -f1)"
}

# expected_results prints the result names a full run must contain.
expected_results() {
	local bins=$CACHE/bin e name bin pkg
	sel smoke-devinfo && echo smoke-devinfo
	sel smoke-write-lat && echo smoke-write-lat
	sel smoke-send-lat && echo smoke-send-lat
	sel smoke-send-lat-large && echo smoke-send-lat-large
	for e in "${GO_TESTS[@]}"; do
		read -r name bin pkg <<<"$e"
		if sel "$name" && [[ -x $bins/$bin ]]; then
			echo "$name"
			"$bins/$bin" -test.list "$RUN" 2>/dev/null | grep '^Test' | sed "s|^|$name/|"
		fi
		if sel "$name-bench" && [[ -x $bins/$bin && $BENCH != none ]]; then echo "$name-bench"; fi
	done
	if sel detector && [[ -x $bins/vigil ]]; then echo detector; fi
	if sel c-hbwrite && [[ -x $bins/hbwrite ]]; then echo c-hbwrite; fi
	if sel c-udlat && [[ -x $bins/udlat ]]; then echo c-udlat; fi
	if sel c-rcpost && [[ -x $bins/rcpost ]]; then echo c-rcpost; fi
	if sel twoguest && [[ -x $bins/twoguest ]]; then echo twoguest; fi
	if sel threeguest && [[ -x $bins/twoguest && -x $CACHE/hub ]]; then echo threeguest-a; echo threeguest-b; fi
	return 0
}

expected_benches() {
	local bins=$CACHE/bin e name bin pkg
	[[ $BENCH == none ]] && return 0
	for e in "${GO_TESTS[@]}"; do
		read -r name bin pkg <<<"$e"
		if sel "$name-bench" && [[ -x $bins/$bin ]]; then
			"$bins/$bin" -test.list "$BENCH" 2>/dev/null | grep '^Benchmark' | sed "s|^|$name/|"
		fi
	done
	return 0
}

boot() {
	local log=$CACHE/console.log
	# tsc=reliable: the TSC as clocksource, as on the machines Vigil runs on.
	# Without it the kernel (which cannot verify TCG's TSC) reads the HPET,
	# and every clock read is a system call of about 4 µs, which the Go
	# runtime's scheduler pays and perftest's rdtsc does not.
	local append="console=ttyS0 panic=-1 quiet tsc=reliable vigil.run=$RUN vigil.bench=$BENCH vigil.benchtime=$BENCHTIME vigil.benchcount=$BENCHCOUNT vigil.only=$ONLY"
	[[ -n $GOFLAGS_EXTRA ]] && append+=" vigil.goflags=$GOFLAGS_EXTRA"
	[[ -n $GOENV_EXTRA ]] && append+=" vigil.goenv=$GOENV_EXTRA"
	log "booting qemu (tcg, -smp 2, -m 1024, timeout ${TIMEOUT}s)"
	local filter=(grep --line-buffered -E '^(RXE-|\[[a-z-]+\] (--- FAIL|FAIL|panic|.*_test.go:[0-9]+:))')
	[[ $VERBOSE == 1 ]] && filter=(cat)
	set +e
	timeout --foreground -k 10 "$TIMEOUT" qemu-system-x86_64 -machine q35 -accel tcg -cpu max \
		-m 1024 -smp 2 -nographic -no-reboot -nic none -monitor none -serial stdio \
		-kernel "$KDIR/boot/vmlinuz-$KVER" -initrd "$CACHE/initrd.gz" -append "$append" \
		</dev/null 2>&1 | tr -d '\r' | tee "$log" | "${filter[@]}"
	QEMU_RC=${PIPESTATUS[0]}
	set -e
}

# victim_ready CONSOLE PID FAILLINE WHO FILE... waits until the victim
# guest's CONSOLE says its links are up (RXE-TWOGUEST-READY); if its qemu
# (PID) ends or the time-out passes first, it appends FAILLINE to the
# console log and shows the tail of the FILEs.
victim_ready() {
	local console=$1 pid=$2 failline=$3 who=$4 i=0
	shift 4
	until grep -q 'RXE-TWOGUEST-READY' "$console" 2>/dev/null; do
		i=$((i + 1))
		if ((i > TIMEOUT * 10)) || ! kill -0 "$pid" 2>/dev/null; then
			echo "$failline" >>"$CACHE/console.log"
			log "$who never got ready; its console (and qemu's output):"
			tail -30 "$@" 2>&1 | tr -d '\r' >&2
			return
		fi
		sleep 0.1
	done
}

# boot_twoguest runs the two-guest job: guests a and b, each with rxe0 on a
# virtio NIC, joined by a qemu dgram socket pair (no host networking). Once
# guest b says its heartbeat links are up, its qemu gets SIGKILL (the host
# is powered off outright); guest a's survivors must report all of b's
# ranks. Guest a's RXE lines are appended to the main console log.
boot_twoguest() {
	local a=$CACHE/console-a.log b=$CACHE/console-b.log i pb
	rm -f "$CACHE"/tg-*.sock "$a" "$b"
	log "two guests (tcg, -smp 1 each, dgram socket network)"
	tgargs() { # ROLE LOCAL REMOTE MAC
		echo -machine q35 -accel tcg -cpu max -m 768 -smp 1 -nographic -no-reboot -monitor none \
			-netdev "dgram,id=n0,local.type=unix,local.path=$2,remote.type=unix,remote.path=$3" \
			-device "virtio-net-pci,netdev=n0,mac=$4" \
			-kernel "$KDIR/boot/vmlinuz-$KVER" -initrd "$CACHE/initrd.gz"
	}
	# shellcheck disable=SC2046
	timeout --foreground -k 10 "$TIMEOUT" qemu-system-x86_64 $(tgargs a "$CACHE/tg-a.sock" "$CACHE/tg-b.sock" 52:54:00:12:34:0a) \
		-serial stdio -append "console=ttyS0 panic=-1 quiet vigil.role=a" </dev/null 2>&1 | tr -d '\r' >"$a" &
	local ja=$!
	# Guest b runs as a direct child: $! is its qemu, which gets SIGKILL.
	# shellcheck disable=SC2046
	qemu-system-x86_64 $(tgargs b "$CACHE/tg-b.sock" "$CACHE/tg-a.sock" 52:54:00:12:34:0b) \
		-serial "file:$b" -append "console=ttyS0 panic=-1 quiet vigil.role=b" </dev/null >/dev/null 2>&1 &
	pb=$!
	victim_ready "$b" "$pb" "RXE-RESULT name=twoguest-b status=fail dur_ms=0" "guest b" "$b"
	kill -9 "$pb" 2>/dev/null && log "guest b powered off (SIGKILL to its qemu, pid $pb)"
	wait "$pb" 2>/dev/null || true
	wait "$ja" || log "guest a: qemu exit $? (timeout is ${TIMEOUT}s)"
	grep -E '^(RXE-|\[twoguest\] )' "$a" | sed 's/^/[guest-a] /' >&2
	grep -E '^RXE-(RESULT|INFO|FATAL)' "$a" >>"$CACHE/console.log"
	grep -q '^RXE-DONE' "$a" || echo "RXE-FATAL guest a did not finish" >>"$CACHE/console.log"
}

# boot_threeguest runs the three-guest job: guests a, b and c, each with
# rxe0 on a virtio NIC whose frames go through lab/rxe/hub (an Ethernet hub on
# Unix datagram sockets: qemu's dgram backend is point to point). Once
# guest c says its heartbeat links are up, its qemu gets SIGKILL; the
# survivors on guests a and b must all report exactly c's ranks, which
# takes broadcasts and re-linked heartbeats between a and b.
boot_threeguest() {
	local g pc ph logs=() pids=() i
	rm -f "$CACHE"/t3-*.sock "$CACHE"/console-3*.log
	log "three guests (tcg, -smp 1 each, through lab/rxe/hub)"
	"$CACHE/hub" "$CACHE/t3-hub-a.sock:$CACHE/t3-a.sock" "$CACHE/t3-hub-b.sock:$CACHE/t3-b.sock" \
		"$CACHE/t3-hub-c.sock:$CACHE/t3-c.sock" &
	ph=$!
	t3args() { # ROLE MAC
		echo -machine q35 -accel tcg -cpu max -m 768 -smp 1 -nographic -no-reboot -monitor none \
			-netdev "dgram,id=n0,local.type=unix,local.path=$CACHE/t3-$1.sock,remote.type=unix,remote.path=$CACHE/t3-hub-$1.sock" \
			-device "virtio-net-pci,netdev=n0,mac=$2" \
			-kernel "$KDIR/boot/vmlinuz-$KVER" -initrd "$CACHE/initrd.gz"
	}
	for g in a b; do
		# shellcheck disable=SC2046
		timeout --foreground -k 10 "$TIMEOUT" qemu-system-x86_64 $(t3args $g 52:54:00:12:35:0$g) \
			-append "console=ttyS0 panic=-1 quiet vigil.role=$g vigil.guests=3" \
			-serial "file:$CACHE/console-3$g.log" </dev/null >"$CACHE/qemu-3$g.log" 2>&1 &
		pids+=($!)
		logs+=("$CACHE/console-3$g.log")
	done
	# Guest c runs as a direct child: $! is its qemu, which gets SIGKILL.
	# shellcheck disable=SC2046
	qemu-system-x86_64 $(t3args c 52:54:00:12:35:0c) -append "console=ttyS0 panic=-1 quiet vigil.role=c vigil.guests=3" \
		-serial "file:$CACHE/console-3c.log" </dev/null >"$CACHE/qemu-3c.log" 2>&1 &
	pc=$!
	victim_ready "$CACHE/console-3c.log" "$pc" "RXE-FATAL guest c of the three-guest run never got ready" "guest c" \
		"$CACHE/console-3c.log" "$CACHE/qemu-3c.log"
	kill -9 "$pc" 2>/dev/null && log "guest c powered off (SIGKILL to its qemu, pid $pc)"
	wait "$pc" 2>/dev/null || true
	for i in 0 1; do
		wait "${pids[$i]}" || log "three-guest ${logs[$i]##*/}: qemu exit $? (timeout is ${TIMEOUT}s)"
	done
	kill "$ph" 2>/dev/null
	wait "$ph" 2>/dev/null || true
	for g in a b; do
		tr -d '\r' <"$CACHE/console-3$g.log" | grep -E '^(RXE-|\[twoguest\] )' | sed "s/^/[guest3-$g] /" >&2
		tr -d '\r' <"$CACHE/console-3$g.log" | grep -E '^RXE-(RESULT|INFO|FATAL)' >>"$CACHE/console.log"
		tr -d '\r' <"$CACHE/console-3$g.log" | grep -q '^RXE-DONE' ||
			echo "RXE-FATAL guest $g of the three-guest run did not finish" >>"$CACHE/console.log"
	done
}

report() {
	local log=$CACHE/console.log fail=0 name st
	# CPU profiles (RXE_GOFLAGS=-test.cpuprofile=/tmp/cpu.prof), one per
	# test binary: go tool pprof .rxe/bin/NAME.test .rxe/NAME.cpu.prof
	for name in $(sed -n 's/^RXE-PROF \([^ ]*\) .*/\1/p' "$log" | sort -u); do
		sed -n "s/^RXE-PROF $name //p" "$log" | base64 -d >"$CACHE/$name.cpu.prof" &&
			log "CPU profile of $name: $CACHE/$name.cpu.prof"
	done
	declare -A got=()
	while read -r name st; do got[$name]=$st; done < <(
		sed -n 's/^RXE-RESULT name=\([^ ]*\) status=\([a-z]*\) .*/\1 \2/p' "$log")
	echo
	echo "== rxe results (console log: $log)"
	grep -E '^RXE-(RESULT|BENCH|FATAL)' "$log" || true
	for name in "${!got[@]}"; do
		[[ ${got[$name]} == pass ]] || {
			echo "rxe: FAIL $name status=${got[$name]}"
			fail=1
		}
	done
	while read -r name; do
		[[ -z $name ]] && continue
		[[ -n ${got[$name]+x} ]] || {
			echo "rxe: FAIL $name: no result"
			fail=1
		}
	done < <(expected_results)
	while read -r name; do
		[[ -z $name ]] && continue
		grep -q "^RXE-BENCH name=$name[ /]" "$log" || { # a benchmark or its sub-benchmarks
			echo "rxe: FAIL $name: no benchmark result"
			fail=1
		}
	done < <(expected_benches)
	grep -q '^RXE-FATAL' "$log" && fail=1
	grep -q '^RXE-DONE' "$log" || {
		echo "rxe: FAIL guest did not finish (qemu exit $QEMU_RC; timeout is ${TIMEOUT}s)"
		fail=1
	}
	# Go benchmark against the same loop in C, both in this guest: the best
	# of each one's runs (the host may be busy: the minimum is the least
	# disturbed run).
	local gons gcns cns
	best() { sed -n "s/^RXE-BENCH name=$1 .*ns_op=\([0-9.]*\).*/\1/p" "$log" | sort -g | head -1; }
	gons=$(best 'verbs\/BenchmarkRDMAWriteHeartbeat')
	gcns=$(best 'verbs\/BenchmarkRDMAWriteHeartbeatInC')
	cns=$(best 'c\/hbwrite')
	if [[ -n $gons && -n $cns ]]; then
		awk -v g="$gons" -v gc="${gcns:-0}" -v c="$cns" 'BEGIN {
			printf "RXE-RATIO best go_ns_op=%s c_ns_op=%s go_over_c=%.2f", g, c, g / c
			if (gc > 0) printf " go_loop_in_c_ns_op=%s go_loop_in_c_over_c=%.2f", gc, gc / c
			printf "\n" }'
	fi
	# The transport's heartbeat (SendHeartbeat: link lookup, lock, the same
	# C write) against the C loop, and its latencies against perftest's.
	local tns wl sl hl ml
	tns=$(best 'tverbs\/BenchmarkHeartbeatRDMA')
	if [[ -n $tns && -n $cns ]]; then
		awk -v g="$tns" -v c="$cns" 'BEGIN { printf "RXE-RATIO best transport_hb_ns_op=%s c_ns_op=%s transport_over_c=%.2f\n", g, c, g / c }'
	fi
	metric() { sed -n "s/^RXE-BENCH name=$1 .*$2=\([0-9.]*\).*/\1/p" "$log" | sort -g | head -1; }
	# ratio A_NAME A A_DIV B_NAME B B_DIV [SUFFIX]: one RXE-RATIO line with
	# A/A_DIV, B/B_DIV (ns to µs: 1000) and their ratio, if both are known.
	ratio() {
		[[ -n $2 && -n $5 ]] || return 0
		awk -v an="$1" -v a="$2" -v ad="$3" -v bn="$4" -v b="$5" -v bd="$6" -v x="${7:-}" \
			'BEGIN { printf "RXE-RATIO best %s=%.2f %s=%.2f over=%.2f%s\n", an, a / ad, bn, b / bd, (a / ad) / (b / bd), (x == "" ? "" : " " x) }'
	}
	wl=$(metric 'perftest\/ib_write_lat_8B' lat_typical_us)
	sl=$(metric 'perftest\/ib_send_lat_8B' lat_typical_us)
	hl=$(metric 'tverbs\/BenchmarkHeartbeatWriteLatency' ns_oneway_p50)
	ml=$(metric 'tverbs\/BenchmarkMessageLatency' ns_oneway_p50)
	ratio hb_write_oneway_p50_us "$hl" 1000 ib_write_lat_typical_us "$wl" 1
	# Message latencies against ib_send_lat; the goal is at most 2× (warm
	# and cold, issue #15).
	ratio msg_oneway_p50_us "$ml" 1000 ib_send_lat_typical_us "$sl" 1 goal=2
	local mp mc
	mp=$(metric 'tverbs\/BenchmarkMessageLatencyProcs' ns_oneway_p50)
	ratio msg_two_procs_oneway_p50_us "$mp" 1000 ib_send_lat_typical_us "$sl" 1 goal=2
	# The same with each ping sent from the pinging rank's handler, as
	# ib_send_lat posts on its receive completion: no goroutine hand-off
	# at either end (the transport's own time).
	local mh
	mh=$(metric 'tverbs\/BenchmarkMessageLatencyHandler' ns_oneway_p50)
	ratio msg_two_procs_handler_oneway_p50_us "$mh" 1000 ib_send_lat_typical_us "$sl" 1 goal=2
	mc=$(metric 'tverbs\/BenchmarkMessageLatencyCold' ns_oneway_p50)
	ratio msg_cold_two_procs_oneway_p50_us "$mc" 1000 ib_send_lat_typical_us "$sl" 1 goal=2
	# The same two-process messages against the same pattern in plain C
	# (lab/rxe/udlat.c: UD SEND ping-pong between two processes, busy-polling
	# warm; cold, the receiver asleep on its channel after 120 ms idle):
	# the floor of exactly this pattern on this device.
	local cw cc
	cw=$(metric 'c\/udlat_warm' ns_oneway_p50)
	cc=$(metric 'c\/udlat_cold' ns_oneway_p50)
	ratio msg_two_procs_oneway_p50_us "$mp" 1000 c_udlat_warm_us "$cw" 1000 goal=2
	ratio msg_cold_two_procs_oneway_p50_us "$mc" 1000 c_udlat_cold_us "$cc" 1000 goal=2
	# Against the same device driven from Go without the transport
	# (verbs/BenchmarkRCPingPongProcs: raw RC SEND ping-pong between two Go
	# processes): what the transport itself adds, and Go's own floor
	# against ib_send_lat.
	local gp
	gp=$(metric 'verbs\/BenchmarkRCPingPongProcs' ns_oneway_p50)
	ratio msg_two_procs_oneway_p50_us "$mp" 1000 go_raw_rc_pingpong_us "$gp" 1000
	ratio msg_two_procs_handler_oneway_p50_us "$mh" 1000 go_raw_rc_pingpong_us "$gp" 1000
	ratio go_raw_rc_pingpong_us "$gp" 1000 ib_send_lat_typical_us "$sl" 1
	# The C reference itself against ib_send_lat (RC, back to back).
	if [[ -n $sl && -n $cw && -n $cc ]]; then
		awk -v w="$cw" -v c="$cc" -v s="$sl" 'BEGIN { printf "RXE-RATIO best c_udlat_warm_us=%.2f c_udlat_cold_us=%.2f ib_send_lat_typical_us=%s warm_over=%.2f cold_over=%.2f\n", w / 1000, c / 1000, s, w / 1000 / s, c / 1000 / s }'
	fi
	# The cold message against ib_send_lat -e, which sleeps on its
	# completion channel as the engine does when idle.
	local se
	se=$(metric 'perftest\/ib_send_lat_events_8B' lat_typical_us)
	ratio msg_cold_two_procs_oneway_p50_us "$mc" 1000 ib_send_lat_events_typical_us "$se" 1
	# Authentication's share of a message: tag and check of one datagram
	# (SipHash, the datagrams'; HMAC-SHA256, TCP's) against the two-process
	# one-way time (issue #15 item 2).
	local mac hmac
	mac=$(best 'tverbs\/BenchmarkDatagramMAC\/siphash')
	hmac=$(best 'tverbs\/BenchmarkDatagramMAC\/hmac')
	if [[ -n $mac && -n $hmac && -n $mp ]]; then
		awk -v a="$mac" -v h="$hmac" -v m="$mp" 'BEGIN { printf "RXE-RATIO best datagram_siphash_ns=%s datagram_hmac_ns=%s msg_two_procs_oneway_ns=%s siphash_share=%.3f hmac_share=%.3f\n", a, h, m, a / m, h / m }'
	fi
	# The same benchmark over verbs and over TCP in this guest: IMB
	# PingPong by size (goal: not slower than TCP at 4 KiB and 64 KiB) and
	# the broadcast of one failure to 8 ranks, for each propagation.
	local sz v c u r bc
	for sz in 0 1024 4096 65536; do
		v=$(metric "tverbs\/BenchmarkIMB\/verbs\/PingPong\/${sz}B" t_avg_us)
		c=$(metric "tverbs\/BenchmarkIMB\/tcp\/PingPong\/${sz}B" t_avg_us)
		if [[ -n $v && -n $c ]]; then
			awk -v v="$v" -v c="$c" -v z="$sz" 'BEGIN { printf "RXE-RATIO best imb_pingpong_%sB verbs_t_avg_us=%s tcp_t_avg_us=%s verbs_over_tcp=%.2f%s\n", z, v, c, v / c, (z >= 4096 ? " goal=1" : "") }'
		fi
		# The verbs transport with every message over UD (no RC message
		# links), for comparison.
		u=$(metric "tverbs\/BenchmarkIMB\/verbsud\/PingPong\/${sz}B" t_avg_us)
		if [[ -n $u && -n $c ]]; then
			awk -v v="$u" -v c="$c" -v z="$sz" 'BEGIN { printf "RXE-RATIO best imb_pingpong_%sB_udonly verbsud_t_avg_us=%s tcp_t_avg_us=%s verbsud_over_tcp=%.2f\n", z, v, c, v / c }'
		fi
		# rxe's own RC SEND one-way latency at this size (ib_send_lat):
		# the floor under the transport, against TCP on loopback.
		r=$(metric "perftest\/ib_send_lat_${sz}B" lat_typical_us)
		if [[ -n $r && -n $c ]]; then
			awk -v r="$r" -v c="$c" -v v="${v:-0}" -v z="$sz" 'BEGIN { printf "RXE-RATIO best rxe_send_lat_%sB ib_send_lat_typical_us=%s tcp_t_avg_us=%s rxe_over_tcp=%.2f verbs_over_rxe=%.2f\n", z, r, c, r / c, v / r }'
		fi
	done
	for bc in $(sed -n 's/^RXE-BENCH name=tverbs\/BenchmarkFailurePropagation\/verbs\/\([^ ]*\) .*/\1/p' "$log" | sort -u); do
		v=$(metric "tverbs\/BenchmarkFailurePropagation\/verbs\/$bc" spread_us)
		c=$(metric "tverbs\/BenchmarkFailurePropagation\/tcp\/$bc" spread_us)
		if [[ -n $v && -n $c ]]; then
			awk -v v="$v" -v c="$c" -v b="$bc" 'BEGIN { printf "RXE-RATIO best propagation_%s verbs_spread_us=%s tcp_spread_us=%s verbs_over_tcp=%.2f\n", b, v, c, (c > 0 ? v / c : 0) }'
		fi
	done
	# The settled CPU ratio: Go and C measured round by round on the same
	# link (and the stand-alone C program between rounds), median of the
	# per-round ratios, median over the benchmark's runs.
	med() { sed -n "s/^RXE-BENCH name=$1 .*$2=\([0-9.]*\).*/\1/p" "$log" | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
	local ic ip gh ch ph
	ic=$(med 'tverbs\/BenchmarkHeartbeatVsC' go_over_c)
	ip=$(med 'tverbs\/BenchmarkHeartbeatVsC' go_over_hbwrite)
	gh=$(med 'tverbs\/BenchmarkHeartbeatVsC' go_ns_hb)
	ch=$(med 'tverbs\/BenchmarkHeartbeatVsC' c_ns_hb)
	ph=$(med 'tverbs\/BenchmarkHeartbeatVsC' hbwrite_ns_hb)
	if [[ -n $ic ]]; then
		echo "RXE-RATIO interleaved transport_hb_ns=${gh} c_loop_ns=${ch} hbwrite_ns=${ph:-none} transport_over_c_loop=${ic} transport_over_hbwrite=${ip:-none} target=1.3"
	fi
	local n_pass n_all
	n_all=${#got[@]}
	n_pass=0
	for name in "${!got[@]}"; do [[ ${got[$name]} == pass ]] && n_pass=$((n_pass + 1)); done
	echo "rxe: $n_pass passed, $((n_all - n_pass)) failed; end to end $(($(elapsed) / 1000)) s"
	return $fail
}

main() {
	mkdir -p "$CACHE"
	ensure_packages
	fetch_kernel
	log "kernel $KVER"
	rm -rf "$CACHE/bin"
	mkdir -p "$CACHE/bin"
	build_go_tests "$CACHE/bin"
	build_c_loop "$CACHE/bin"
	build_initramfs
	log "prepared in $(($(elapsed) / 1000)) s"
	if [[ $ONLY == twoguest || $ONLY == threeguest || $ONLY == twoguest,threeguest || $ONLY == threeguest,twoguest ]]; then
		echo "RXE-DONE (no single-guest entry selected)" >"$CACHE/console.log"
		QEMU_RC=0
	else
		boot
	fi
	if sel twoguest && [[ -x $CACHE/bin/twoguest ]]; then boot_twoguest; fi
	if sel threeguest && [[ -x $CACHE/bin/twoguest && -x $CACHE/hub ]]; then boot_threeguest; fi
	report
}

main "$@"
