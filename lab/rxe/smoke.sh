#!/bin/sh
# Smoke tests run in the rxe guest by lab/rxe/init.sh; they prove the recipe with
# stock rdma-core tools before any Vigil code runs.
#   smoke.sh devinfo     ibv_devinfo sees rxe0 with port 1 ACTIVE
#   smoke.sh write-lat   perftest ib_write_lat loopback on rxe0 (8-byte writes)
#   smoke.sh send-lat    perftest ib_send_lat loopback on rxe0 (8-byte sends),
#                        polling, then again with -e (sleeping on the
#                        completion channel: the reference for a cold message)
#   smoke.sh send-lat-large  the same with 4 KiB and 64 KiB sends
set -u
DEV=${VIGIL_RXE_DEV:-rxe0}

# gid_index prints the index of the first RoCE v2 GID holding an IPv4-mapped
# address on port 1.
gid_index() {
	d=/sys/class/infiniband/$DEV/ports/1
	for g in "$d"/gids/*; do
		i=${g##*/}
		case "$(cat "$g" 2>/dev/null)" in
		0000:0000:0000:0000:0000:ffff:*)
			[ "$(cat "$d/gid_attrs/types/$i" 2>/dev/null)" = "RoCE v2" ] && { echo "$i"; return 0; }
			;;
		esac
	done
	return 1
}

# lat TOOL NAME [SIZE [ARGS]]: perftest TOOL loopback on $DEV, SIZE-byte
# messages (default 8), latencies reported in TSC cycles (-C) and converted
# with /tests/tsc's measured rate (perftest's own CPU MHz estimate fails
# under TCG). Prints one RXE-BENCH line NAME with microseconds.
lat() {
	tool=$1
	size=${3:-8}
	gi=$(gid_index) || { echo "no RoCE v2 IPv4 GID"; exit 1; }
	args="-d $DEV -x $gi -s $size -n 1000 -F -C ${4:-}"
	$tool $args >/tmp/lat-server.log 2>&1 &
	srv=$!
	ok=0
	for try in 1 2 3 4 5 6 7 8 9 10; do
		sleep 0.5
		if $tool $args 127.0.0.1 >/tmp/lat-client.log 2>&1; then ok=1; break; fi
		grep -q -i 'connect' /tmp/lat-client.log || break
	done
	wait $srv
	src=$?
	cat /tmp/lat-client.log
	[ $ok = 1 ] && [ $src = 0 ] || { echo "server:"; cat /tmp/lat-server.log; exit 1; }
	mhz=$(/tests/tsc) || { echo "tsc rate unknown"; exit 1; }
	echo "RXE-INFO tsc_cycles_per_us=$mhz"
	# columns: bytes iters t_min t_max t_typical t_avg t_stdev p99 p99.9 (cycles)
	awk -v mhz="$mhz" -v name="$2" -v size="$size" '$1 == size && NF >= 9 {
		printf "RXE-BENCH name=%s iters=%s lat_typical_us=%.2f lat_avg_us=%.2f lat_p99_us=%.2f\n", name, $2, $5 / mhz, $6 / mhz, $8 / mhz }' /tmp/lat-client.log
}

case "${1:-}" in
devinfo)
	ibv_devinfo -d "$DEV" -v || exit 1
	ibv_devinfo -d "$DEV" | grep -q PORT_ACTIVE || { echo "port not active"; exit 1; }
	gid_index >/dev/null || { echo "no RoCE v2 IPv4 GID"; exit 1; }
	echo "RXE-INFO smoke gid_index=$(gid_index)"
	;;
write-lat) lat ib_write_lat perftest/ib_write_lat_8B ;;
send-lat)
	lat ib_send_lat perftest/ib_send_lat_8B
	lat ib_send_lat perftest/ib_send_lat_events_8B 8 -e
	;;
send-lat-large)
	# RC SEND one-way latency of 4 KiB and 64 KiB: what rxe itself costs
	# for the IMB PingPong sizes (compare with the transport and TCP).
	lat ib_send_lat perftest/ib_send_lat_4096B 4096
	lat ib_send_lat perftest/ib_send_lat_65536B 65536
	;;
*)
	echo "usage: smoke.sh devinfo|write-lat|send-lat|send-lat-large"
	exit 2
	;;
esac
