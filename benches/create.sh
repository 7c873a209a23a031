#!/usr/bin/env bash
# Durable create on its own (issue 2, point 9), separated from what executing the runs costs.
# NOT run in CI; about 30 seconds. See docs/performance.md ("Targets and current figures").
#
# Starts the release binary on a fresh data directory with one demo environment whose runs take
# DEMO_MS milliseconds, 64 at a time, and measures:
#   1. GET /healthz (the ceiling);
#   2. POST /api/v1/agent/runs at 64 connections: 3 s of warm-up, then DURATION seconds;
#   3. the server's CPU time per create during 2 (the figure to compare builds by: the machine's
#      speed moves from run to run, the rate with it);
#   4. the projector's counters from /metrics (index updates submitted and applied, batches).
#
# DEMO_MS=0 (default) makes every created run start and finish at once, as in benches/load.sh:
# each create then brings two more durable commands. DEMO_MS=2000 is the embedded defaults'
# shape: most created runs wait in the queue, as they do when agents take minutes.
#
# Knobs: DEMO_MS=0  DURATION=10  CONNECTIONS=64  PORT=18090  CARGO_TARGET_DIR=target
#        BIN=path (a binary to measure instead of building one: to compare two saved builds)
#        PERF=1 (records 5 s of the server with `perf record --call-graph dwarf`; the data
#        directory is then kept so that `perf report -i DIR/perf.data` can read it)

set -euo pipefail

DEMO_MS=${DEMO_MS:-0}
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-64}
PORT=${PORT:-18090}
CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
export CARGO_TARGET_DIR
BASE="http://127.0.0.1:$PORT"

cd "$(dirname "$0")/.."
command -v wrk >/dev/null 2>&1 || { echo "wrk is needed (benches/load.sh installs it)" >&2; exit 1; }
if [ -z "${BIN:-}" ]; then
    cargo build --release --quiet
    BIN="$CARGO_TARGET_DIR/release/runledger"
fi
case "$BIN" in /*) ;; *) BIN="$PWD/$BIN" ;; esac

WORK=$(mktemp -d /tmp/runledger-create.XXXXXX)
PID=""
cleanup() {
    if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
        kill -TERM "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
    fi
    if [ "${PERF:-0}" = 1 ]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# The queue limits (per team and per environment) are lifted; builds before them (3db3b62)
# refuse those fields, so a start refused over them is retried without them.
write_config() {
    cat >"$WORK/runledger.toml" <<EOF
[server]
bind = "127.0.0.1:$PORT"
data_dir = "$WORK/data"

[limits]
rate_limit = false
$([ "$1" = 1 ] && echo "max_queued_per_team = 1000000000")

[[environments]]
id = "bench"
harness = "demo"
demo_duration_ms = $DEMO_MS
max_concurrent = 64
$([ "$1" = 1 ] && echo "max_queued = 1000000000")
EOF
}

start_server() {
    write_config "$1"
    "$BIN" --config "$WORK/runledger.toml" serve >"$WORK/stdout" 2>"$WORK/stderr" &
    PID=$!
    for _ in $(seq 1 300); do
        curl -sf "$BASE/readyz" >/dev/null && return 0
        kill -0 "$PID" 2>/dev/null || { wait "$PID" 2>/dev/null || true; PID=""; return 1; }
        sleep 0.1
    done
    return 1
}
if ! start_server 1; then
    grep -q 'unknown field `max_queued' "$WORK/stderr" && start_server 0 \
        || { cat "$WORK/stderr" >&2; exit 1; }
fi
KEY=$(head -n1 "$WORK/stdout")
cat >"$WORK/create.lua" <<EOF
wrk.method = "POST"
wrk.body = '{"prompt":"Fix the flaky integration test in the billing service; keep the API unchanged.","title":"load test run"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $KEY"
EOF

echo "== GET /healthz"
wrk -t1 -c"$CONNECTIONS" -d5s --latency "$BASE/healthz" | grep -E "Requests/sec|  99%"
wrk -t1 -c"$CONNECTIONS" -d3s -s "$WORK/create.lua" "$BASE/api/v1/agent/runs" >/dev/null
if [ "${PERF:-0}" = 1 ]; then
    perf record -F "${PERF_FREQ:-499}" --call-graph dwarf,16384 -p "$PID" -o "$WORK/perf.data" -- sleep 5 \
        >/dev/null 2>&1 &
fi
echo "== POST /api/v1/agent/runs (DEMO_MS=$DEMO_MS)"
# CPU time the server spent per create: steadier than the rate on a machine whose speed moves
# from run to run, so it is the figure to compare two builds by.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
# Per thread name (THREADS=1): which of the server's threads the CPU per create went to.
thread_ticks() {
    for t in /proc/$PID/task/*; do
        printf '%s\t%s\n' "$(tr ' ' '_' <"$t/comm")" "$(awk '{print $14 + $15}' "$t/stat")"
    done | awk -F'\t' '{sub(/-[0-9]+$/, "", $1); s[$1] += $2} END {for (k in s) print k, s[k]}' | sort
}
[ "${THREADS:-0}" = 1 ] && thread_ticks >"$WORK/threads.before"
before=$(cpu_ticks)
wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "$WORK/create.lua" "$BASE/api/v1/agent/runs" \
    >"$WORK/wrk.out"
after=$(cpu_ticks)
[ "${THREADS:-0}" = 1 ] && thread_ticks >"$WORK/threads.after"
grep -E "Requests/sec|  50%|  99%|Non-2xx" "$WORK/wrk.out"
requests=$(awk '/requests in/ {print $1}' "$WORK/wrk.out")
awk -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" -v n="$requests" \
    'BEGIN { if (n > 0) printf "server CPU per create: %.1f us (%.2f cores)\n", t / hz * 1e6 / n, t / hz / '"$DURATION"' }'
if [ "${THREADS:-0}" = 1 ]; then
    join -a2 -e0 -o 0,1.2,2.2 "$WORK/threads.before" "$WORK/threads.after" \
        | awk -v hz="$(getconf CLK_TCK)" -v n="$requests" '$3 > $2 {
            printf "  thread %-24s %6.1f us per create\n", $1, ($3 - $2) / hz * 1e6 / n }'
fi
wait_perf=$(jobs -p | grep -v "^$PID$" || true)
[ -z "$wait_perf" ] || wait $wait_perf || true
echo "== projector"
curl -s -H "Authorization: Bearer $KEY" "$BASE/metrics" \
    | grep -E "^runledger_index_updates_total|^runledger_index_batch_duration_seconds_(sum|count)|^runledger_durable_sync_duration_seconds_count"
