#!/bin/sh
# detector.sh N: a Vigil job of N agents over the verbs transport in the rxe
# guest (`vigil run -n N -transport verbs`, every agent a process on rxe0),
# one agent killed with SIGKILL once the RDMA heartbeat links are up.
# The start-up grace is long (20 s): on a loaded host the TCG guest runs
# ~10x slower, and links come up seconds apart. Passes when every survivor reports the victim (completeness) and nobody
# reports anyone else (accuracy), and no agent fell back to TCP.
# Prints RXE-INFO lines with the numbers.
set -u
N=${1:-8}
VICTIM=$((N / 2 - 1))
OUT=/tmp/detector.out
ERR=/tmp/detector.err
fail() {
	echo "detector: FAIL: $*"
	echo "--- vigil stdout"; cat $OUT
	echo "--- vigil stderr (first 60 and last 40 lines)"; head -60 $ERR; echo ...; tail -40 $ERR
	[ -n "${RUN:-}" ] && kill -9 "$RUN" 2>/dev/null
	exit 1
}
now_ms() { awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime; }

VIGIL_VERBS_DEVICE=${VIGIL_RXE_DEV:-rxe0} /tests/vigil run -n "$N" -transport verbs -h 50ms -delta 3s -grace 20s \
	-v -t 120s >$OUT 2>$ERR &
RUN=$!

T_START=$(now_ms)
i=0
until grep -q "ranks up" $OUT; do
	i=$((i + 1))
	[ $i -gt 600 ] && fail "job not up after 60 s"
	kill -0 $RUN 2>/dev/null || fail "vigil run exited early"
	sleep 0.1
done
grep -q "verbs transport unavailable" $ERR && fail "an agent fell back to tcp"

# Wait for every rank's heartbeat link (one "link up" log per emitter).
i=0
while [ "$(grep -c 'RDMA heartbeat link up' $ERR)" -lt "$N" ]; do
	i=$((i + 1))
	[ $i -gt 300 ] && fail "only $(grep -c 'RDMA heartbeat link up' $ERR) of $N RDMA heartbeat links up after 30 s"
	sleep 0.1
done
# Past the start-up grace: suspicions are armed everywhere.
while [ $(($(now_ms) - T_START)) -lt 22000 ]; do sleep 0.2; done
grep -q "crashed\|left" $OUT && fail "a rank was reported before any failure (false suspicion)"
echo "RXE-INFO detector n=$N rdma_links=$(grep -c 'RDMA heartbeat link up' $ERR)"

# The victim: the agent whose environment says VIGIL_RANK=$VICTIM.
PID=
for e in /proc/[0-9]*/environ; do
	if tr '\0' '\n' <"$e" 2>/dev/null | grep -qx "VIGIL_RANK=$VICTIM"; then
		p=${e#/proc/}
		PID=${p%/environ}
		break
	fi
done
[ -n "$PID" ] || fail "no agent with VIGIL_RANK=$VICTIM"
T0=$(now_ms)
kill -9 "$PID"

# vigil run's lines: "[+12.345s] rank 1: rank 3 (pid 827) crashed (detected by 4)".
CRASHED=": rank $VICTIM( \(pid [0-9]+\))? crashed"
i=0
while [ "$(grep -cE "$CRASHED" $OUT)" -lt $((N - 1)) ]; do
	i=$((i + 1))
	[ $i -gt 300 ] && fail "$(grep -cE "$CRASHED" $OUT) of $((N - 1)) survivors reported rank $VICTIM after 30 s"
	sleep 0.1
done
T1=$(now_ms)
sleep 1
kill -INT $RUN
wait $RUN

reporters=$(grep -E "$CRASHED" $OUT | sed -E 's/^(\[[^]]*\] )?rank ([0-9]+):.*/\2/' | sort -u | wc -l)
[ "$reporters" -eq $((N - 1)) ] || fail "$reporters distinct survivors reported rank $VICTIM, want $((N - 1))"
grep -E ": rank [0-9]+( \(pid [0-9]+\))? (crashed|left)" $OUT | grep -vE "$CRASHED" | grep -q . &&
	fail "ranks other than $VICTIM reported: $(grep -E "crashed|left" $OUT | grep -vE "$CRASHED")"
grep -E "$CRASHED" $OUT | grep -qE "^(\[[^]]*\] )?rank $VICTIM:" && fail "the victim reported itself"
echo "RXE-INFO detector victim=$VICTIM survivors_reporting=$reporters all_reported_ms=$((T1 - T0)) h_ms=50 delta_ms=3000"
cat $OUT
exit 0
