#!/bin/sh
# bench.sh: run queen-bench against a private throwaway PostgreSQL 15 and a fresh queend.
#
#   contrib/bench.sh [queen-bench options]      e.g.  contrib/bench.sh --quick
#   contrib/bench.sh --help                      queen-bench's options and phases
#   contrib/bench.sh --only push-load,drain      some phases
#   contrib/bench.sh --scale                     also the million-partition phase (long)
#
# Starts PostgreSQL (fsync=off, synchronous_commit=off, shared_buffers=1GB, loopback, a free
# port) in a temp dir, starts the broker on it, waits for GET /health, runs queen-bench with
# --url, --pg (same server, for the baseline), --queend-pid (the broker's CPU and RSS from
# /proc), --pg-data (the database's CPU from /proc), --restart-cmd (a script that restarts
# the broker the same way and prints its new pid), --pg-cmd (a script that stops PostgreSQL
# at once or starts it, for the outage phase), and stops everything on exit.  A default run
# takes about ten minutes; --quick about two.  Every rate is printed with its ratio to the raw INSERT baseline of the same run, and
# the figures the issue targets name theirs, e.g. "(target >= 1.0x)".
#
# The broker runs retention rounds every BENCH_RETENTION_INTERVAL ms, so that the retention
# phase sees rounds all along its window (the other phases' queues keep everything, so there a
# round deletes nothing and costs little next to the pushes).  PostgreSQL logs every lock wait
# longer than 20 ms (log_lock_waits, deadlock_timeout); their count, from the whole run, is
# printed after queen-bench's: a retention round must never make a push wait more than 50 ms
# (SPEC), and in the retention phase no push waits for another push's row locks.
#
# Environment:
#   BUILD_DIR     build tree (default: ../build next to the checkout root)
#   QUEEND        broker binary (default: $BUILD_DIR/src/queend)
#   QUEEN_BENCH   benchmark binary (default: $BUILD_DIR/contrib/queen-bench)
#   PG_BIN        PostgreSQL binaries (default: /usr/lib/postgresql/15/bin)
#   BENCH_RETENTION_INTERVAL  the broker's RETENTION_INTERVAL, ms (default 1000; min 100)
#   KEEP_TMP=1    keep the temp dir (logs, data) after the run
#   BENCH_LOG_LEVEL  the broker's LOG_LEVEL (default warn; debug shows spool drain batches)
#   BENCH_PG_CONF extra postgresql.conf lines, e.g. for profiling:
#                 "shared_preload_libraries = 'pg_stat_statements'"
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$root/../build}
QUEEND=${QUEEND:-$BUILD_DIR/src/queend}
QUEEN_BENCH=${QUEEN_BENCH:-$BUILD_DIR/contrib/queen-bench}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
BENCH_RETENTION_INTERVAL=${BENCH_RETENTION_INTERVAL:-1000}
lock_log_ms=20		# lock waits longer than this are logged by PostgreSQL

die() { echo "bench.sh: $*" >&2; exit 2; }

[ -x "$QUEEND" ] || die "no broker at $QUEEND (set QUEEND or BUILD_DIR)"
[ -x "$QUEEN_BENCH" ] || die "no queen-bench at $QUEEN_BENCH (set QUEEN_BENCH or BUILD_DIR)"
[ -x "$PG_BIN/initdb" ] || die "no PostgreSQL binaries in $PG_BIN (set PG_BIN)"
command -v curl >/dev/null || die "curl is needed to poll /health"

# A port nobody listens on now (the kernel picks it; a race with another process is unlikely
# and makes the start fail loudly rather than silently).
free_port() {
	perl -MIO::Socket::INET -e \
		'my $s = IO::Socket::INET->new(Listen => 1, LocalAddr => "127.0.0.1",
		 LocalPort => 0, ReuseAddr => 1) or die "$!\n"; print $s->sockport, "\n"'
}

tmp=$(mktemp -d /tmp/qbench.XXXXXX)
chmod 755 "$tmp"
as_pg=
if [ "$(id -u)" = 0 ]; then
	chown postgres "$tmp"
	as_pg="runuser -u postgres --"
fi
qpid=
pg_started=

cleanup() {
	status=$?
	trap - EXIT INT TERM
	if [ -n "$qpid" ] && [ -s "$tmp/queend.pid" ]; then
		qpid=$(cat "$tmp/queend.pid")
	fi
	if [ -n "$qpid" ] && kill -0 "$qpid" 2>/dev/null; then
		kill -TERM "$qpid" 2>/dev/null || :
		i=0
		while kill -0 "$qpid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
		kill -KILL "$qpid" 2>/dev/null || :
	fi
	if [ -n "$pg_started" ]; then
		$as_pg "$PG_BIN/pg_ctl" -D "$tmp/data" -m fast -w stop >/dev/null 2>&1 || :
	fi
	if [ "$status" -ne 0 ] && [ "$status" -ne 1 ]; then
		echo "bench.sh: failed (exit $status); last lines of the logs:" >&2
		tail -n 20 "$tmp/queend.log" "$tmp/pg.log" 2>/dev/null >&2 || :
	fi
	if [ "${KEEP_TMP:-0}" = 1 ]; then
		echo "bench.sh: kept $tmp" >&2
	else
		rm -rf "$tmp"
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- PostgreSQL
pgport=$(free_port)
$as_pg "$PG_BIN/initdb" -D "$tmp/data" -U postgres -A trust -E UTF8 --no-locale >"$tmp/initdb.log" 2>&1 ||
	{ cat "$tmp/initdb.log" >&2; die "initdb failed"; }
cat >>"$tmp/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $pgport
unix_socket_directories = '$tmp'
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 1GB
max_connections = 200
log_lock_waits = on
deadlock_timeout = '${lock_log_ms}ms'
${BENCH_PG_CONF:-}
EOF
$as_pg "$PG_BIN/pg_ctl" -D "$tmp/data" -l "$tmp/pg.log" -w -t 60 start >/dev/null ||
	{ cat "$tmp/pg.log" >&2; die "PostgreSQL did not start"; }
pg_started=1

# --- queend
# The broker's settings live in one env file, so that the restart command (the scale phase
# restarts the broker to measure its time to ready) starts it exactly as this script did.
qport=$(free_port)
mkdir -p "$tmp/spool"
cat >"$tmp/queend.env" <<EOF
PG_HOST=127.0.0.1 PG_PORT=$pgport PG_USER=postgres PG_PASSWORD=x PG_DB=postgres
PORT=$qport HOST=127.0.0.1 LOG_LEVEL=${BENCH_LOG_LEVEL:-warn} FILE_BUFFER_DIR=$tmp/spool
RETENTION_INTERVAL=$BENCH_RETENTION_INTERVAL
QUEEN_ENCRYPTION_KEY=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
EOF
cat >"$tmp/restart-queend" <<EOF
#!/bin/sh
# Stops the broker (SIGTERM, then waits for it to exit), starts it again with the same
# settings and prints its pid.
pid=\$(cat "$tmp/queend.pid")
kill -TERM "\$pid" 2>/dev/null || :
# Until it is gone or a zombie (this script's parent reaps it only once the run ends).
while [ -d /proc/\$pid ] && [ "\$(cut -d' ' -f3 /proc/\$pid/stat 2>/dev/null)" != Z ]; do
	sleep 0.05
done
env \$(cat "$tmp/queend.env") "$QUEEND" >>"$tmp/queend.log" 2>&1 </dev/null &
echo \$! >"$tmp/queend.pid"
echo \$!
EOF
chmod 755 "$tmp/restart-queend"
# The outage phase stops PostgreSQL and starts it again. A fast stop, not an immediate one:
# with synchronous_commit off (above) a crash of PostgreSQL loses the commits of its last
# moments, pushes the broker rightly answered "queued" (SPEC 19: as durable as PostgreSQL);
# t/t6402-fault-pg-restart.t crashes it with the default synchronous_commit.
cat >"$tmp/pg-ctl" <<EOF
#!/bin/sh
case "\$1" in
stop)	exec $as_pg "$PG_BIN/pg_ctl" -D "$tmp/data" -m fast -w stop ;;
start)	exec $as_pg "$PG_BIN/pg_ctl" -D "$tmp/data" -l "$tmp/pg.log" -w -t 60 start ;;
*)	echo "usage: \$0 stop|start" >&2; exit 2 ;;
esac
EOF
chmod 755 "$tmp/pg-ctl"
# shellcheck disable=SC2046
env $(cat "$tmp/queend.env") "$QUEEND" >"$tmp/queend.log" 2>&1 &
qpid=$!
echo "$qpid" >"$tmp/queend.pid"

i=0
until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$qport/health")" = 200 ]; do
	kill -0 "$qpid" 2>/dev/null || { cat "$tmp/queend.log" >&2; qpid=; die "queend exited"; }
	i=$((i + 1))
	[ $i -le 300 ] || die "queend did not answer /health within 30 s"
	sleep 0.1
done

echo "bench.sh: PostgreSQL on 127.0.0.1:$pgport, queend pid $qpid on 127.0.0.1:$qport ($QUEEND)"
set +e
"$QUEEN_BENCH" --url "http://127.0.0.1:$qport" \
	--pg "host=127.0.0.1 port=$pgport user=postgres dbname=postgres" \
	--queend-pid "$qpid" --pg-data "$tmp/data" --restart-cmd "$tmp/restart-queend" \
	--pg-cmd "$tmp/pg-ctl" "$@"
rc=$?
set -e
restarted=
if [ "$(cat "$tmp/queend.pid")" != "$qpid" ]; then
	qpid=$(cat "$tmp/queend.pid")	# the scale phase restarted it: no child of ours now
	restarted=1
fi
if ! kill -0 "$qpid" 2>/dev/null; then
	qrc=0
	why="exit status unknown: restarted during the run"
	if [ -z "$restarted" ]; then
		wait "$qpid" || qrc=$?
		if [ $qrc -gt 128 ]; then
			why="killed by signal $((qrc - 128))"
		else
			why="exit status $qrc"
		fi
	fi
	echo "bench.sh: queend died during the run ($why); last lines of its log:" >&2
	tail -n 20 "$tmp/queend.log" >&2
	qpid=
	[ $rc -ne 0 ] || rc=1
fi
if [ -s "$tmp/queend.log" ]; then
	echo "bench.sh: queend logged $(wc -l <"$tmp/queend.log") line(s) at warn or above; first ones:"
	head -n 5 "$tmp/queend.log"
fi
# One "still waiting" line per wait that outlived deadlock_timeout; an "acquired ... after N ms"
# line follows when it ended with the lock (not when it ended in an error or the shutdown).
waits=$(grep -c 'still waiting for' "$tmp/pg.log" || :)
longest=$(sed -n 's/.* acquired .* after \([0-9.]*\) ms.*/\1/p' "$tmp/pg.log" |
	sort -n | tail -n 1)
msg="bench.sh: lock waits over $lock_log_ms ms logged by PostgreSQL: ${waits:-0}"
[ -z "$longest" ] || msg="$msg (longest acquired after $longest ms)"
echo "$msg"
if [ "${waits:-0}" -gt 0 ]; then
	grep 'still waiting for' "$tmp/pg.log" | head -n 5
fi
exit $rc
