#!/bin/sh
# fault-loop.sh: the crash scenarios of the fault tests, each run N times on a fresh database
# and broker: kill -9 of the broker under load (t/t6401-fault-broker-kill.t) and PostgreSQL
# stopped with -m immediate under load (t/t6402-fault-pg-restart.t). Prints the figures of
# every run and their totals; exits 1 when a run failed or lost an acknowledged item.
#
# Usage: contrib/fault-loop.sh [-n RUNS] [BUILD_DIR]     (defaults: 10, ./build)
set -u
runs=10
if [ "${1:-}" = "-n" ]; then
	runs=$2
	shift 2
fi
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" && pwd) || exit 2
[ -x "$build/src/queend" ] || { echo "fault-loop: no broker at $build/src/queend (build first)" >&2; exit 2; }
log=$(mktemp /tmp/fault-loop.XXXXXX)
status=0
for scenario in kill immediate; do
	case $scenario in
	kill) file=t6401-fault-broker-kill.t; modes= ;;
	immediate) file=t6402-fault-pg-restart.t; modes=immediate ;;
	esac
	i=1
	while [ "$i" -le "$runs" ]; do
		out=$(cd "$build" && QUEEND="$build/src/queend" QUEEN_FAULT_MODES=$modes \
			prove -v -I "$top/t/lib" "$top/t/$file" 2>&1)
		rc=$?
		line=$(printf '%s\n' "$out" | grep -E '^# (kill -9|pg_ctl restart -m immediate):' | head -1)
		printf '%s run %d: %s%s\n' "$scenario" "$i" "${line#\# }" \
			"$([ $rc -eq 0 ] || echo ' FAILED')" | tee -a "$log"
		if [ $rc -ne 0 ]; then
			status=1
			printf '%s\n' "$out" | grep -E '^not ok|Failed test' >&2
		fi
		i=$((i + 1))
	done
done
echo "totals:"
for scenario in kill immediate; do
	grep "^$scenario run" "$log" | awk -v s="$scenario" '
		{ for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[2] ~ /^[0-9.]+$/) sum[kv[1]] += kv[2]; } n++ }
		/FAILED/ { failed++ }
		END { printf "  %s: %d runs, %d failed, acked=%d buffered=%d lost=%d dup_txn=%d dup_plain=%d\n",
			s, n, failed, sum["acked"], sum["buffered"], sum["lost"], sum["dup_txn"], sum["dup_plain"] }'
done
grep -q ' lost=[1-9]' "$log" && status=1
rm -f "$log"
exit $status
