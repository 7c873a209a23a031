#!/usr/bin/env bash
# Instructions per durable create of one release binary, counted by valgrind's callgrind: a
# figure that does not move with the machine's load, to compare builds on a busy machine
# (docs/performance.md, "Create path against 3db3b62"). NOT run in CI; about 20 s.
#
# Starts BIN under callgrind on a fresh data directory with one demo environment whose runs
# last 10 minutes (so that no run starts or ends while counting: at most the first 64 start),
# sends 400 creates to warm up, zeroes the counters, sends CREATES creates from 8 keep-alive
# connections, and prints the server's instructions divided by CREATES: in all, and in the HTTP
# workers (where the request, the handler and the run actor's command are).
# It counts user-space instructions only: the kernel's TCP and fsync work is not in it.
#
# Usage: BIN=path [CREATES=2000] [PORT=18297] [OUT=file] bash benches/create_callgrind.sh
#        then `callgrind_annotate --inclusive=yes OUT.1-NN` shows where a thread's go.

set -euo pipefail

: "${BIN:?BIN=path of a release binary}"
CREATES=${CREATES:-2000}
PORT=${PORT:-18297}
command -v valgrind >/dev/null 2>&1 || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
case "$BIN" in /*) ;; *) BIN="$PWD/$BIN" ;; esac

WORK=$(mktemp -d /tmp/runledger-callgrind.XXXXXX)
OUT=${OUT:-$WORK/callgrind.out}
PID=""
cleanup() {
    if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
        kill -TERM "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
    fi
    rm -rf "$WORK/data"
}
trap cleanup EXIT

# As in benches/create.sh: the queue limits are lifted, and a build that predates them
# (3db3b62) gets the file without them.
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
demo_duration_ms = 600000
max_concurrent = 64
$([ "$1" = 1 ] && echo "max_queued = 1000000000")
EOF
}
write_config 1
timeout 5 "$BIN" --config "$WORK/runledger.toml" serve >/dev/null 2>"$WORK/probe" || true
grep -q 'unknown field `max_queued' "$WORK/probe" && write_config 0
rm -rf "$WORK/data"

valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$OUT" "$BIN" --config "$WORK/runledger.toml" serve \
    >"$WORK/stdout" 2>"$WORK/stderr" &
PID=$!
for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break
    kill -0 "$PID" 2>/dev/null || { cat "$WORK/stderr" >&2; exit 1; }
    sleep 0.5
done
KEY=$(head -n1 "$WORK/stdout")

creates() {
    python3 - "$PORT" "$KEY" "$1" <<'EOF'
import http.client, json, sys, threading
port, key, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
body = json.dumps({"prompt": "Fix the flaky integration test in the billing service; keep the API unchanged.",
                   "title": "load test run"})
headers = {"Content-Type": "application/json", "Authorization": "Bearer " + key}
failed = []
def send(count):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    for _ in range(count):
        connection.request("POST", "/api/v1/agent/runs", body, headers)
        answer = connection.getresponse()
        answer.read()
        if answer.status != 200:
            failed.append(answer.status)
threads = [threading.Thread(target=send, args=(n // 8,)) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
if failed:
    sys.exit(f"{len(failed)} creates failed: {failed[:5]}")
EOF
}
creates 400
callgrind_control -z "$PID" >/dev/null 2>&1
creates "$CREATES"
callgrind_control -d "$PID" >/dev/null 2>&1
# One file per thread (OUT.1-NN): the HTTP workers' are those that ran actix-http's dispatcher.
# Their count is per request; the projector's and the sync thread's depend on how many creates
# each batch or commit gathered, which moves with timing, so the two are printed apart.
all=0
http=0
for f in "$OUT".1-*; do
    # A thread that ran nothing since the counters were zeroed has no total.
    n=$(callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); if ($1 ~ /^[0-9]+$/) print $1}')
    all=$((all + ${n:-0}))
    if grep -q 'actix_http::h1::dispatcher' "$f"; then http=$((http + ${n:-0})); fi
done
awk -v a="$all" -v h="$http" -v n="$CREATES" 'BEGIN {
    printf "instructions per create: %.0f (HTTP workers %.0f, other threads %.0f)\n", a / n, h / n, (a - h) / n }'
