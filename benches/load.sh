#!/usr/bin/env bash
# HTTP load test of runledger (issue 2, point 9). NOT run in CI: it takes about half an hour
# with the default sizes (plus ~5 minutes of replay), needs the whole machine and ~20 GB of
# disk for 1M runs. See docs/performance.md for the figures and how to read them.
#
# What it does, in one run against a fresh data directory:
#   1. builds the release binary and starts it on 127.0.0.1 with a demo environment whose runs
#      finish at once (demo_duration_ms = 0, max_concurrent = 64);
#   2. GET /healthz at 64 connections: the ceiling of this machine with this load generator;
#   3. durable create (POST /api/v1/agent/runs) at 64 connections: req/s and latency, twice:
#      a. on its own, on a second server with a fresh data directory and the embedded defaults'
#         environment (demo runs of 2 s, 64 at a time), so that nearly every created run waits
#         in the queue: what accepting a run durably costs (3 s of warm-up, as
#         benches/create.sh); that server is then stopped and its directory removed;
#      b. on the main server, whose runs also start and finish at once: each create then brings
#         two more durable commands and a transcript file (what running runs costs);
#   4. creates runs until RUNS_SMALL exist, then get-one and list (limit=20&state=SUCCEEDED);
#   5. creates runs until RUNS_LARGE exist, then get-one and list again, and the idle RSS;
#   6. restarts the server on the RUNS_LARGE data: time until /readyz answers 200, idle RSS,
#      the reads again, the time of the first two /metrics scrapes and the idle RSS after them
#      (the RSS target is judged on the highest of the three idle figures);
#   7. with the server stopped: `runledger replay --verify` and `runledger replay` (events/s);
#   8. prints a markdown table.
#
# Every request goes to 127.0.0.1; every load step is bounded by a duration, and the script
# stops the server it started when it exits.
#
# Run it on a quiet machine. For a few minutes after a large data directory was deleted (this
# script's own, at 1M runs: a million transcript files) the kernel is still busy with it, and a
# durable create's p99, which waits for a sync, suffers most (324 ms instead of about 7 ms in
# one run started two minutes after the previous run's cleanup); `sync` does not hasten it.
#
# Knobs (environment variables):
#   RUNS_SMALL=100000 RUNS_LARGE=1000000   stored runs for the two read measurements
#   DURATION=10        seconds of each measured step
#   CONNECTIONS=64     connections of each measured step
#   POPULATE_STEP=30   seconds of each populate round (creates at 64 connections, then drain)
#   PORT=18080         listen port (127.0.0.1 only); step 3a's server uses PORT+1
#   CARGO_TARGET_DIR=target  where the release binary is built
#   BIN=path           a binary to measure instead of building one (to compare saved builds)
#   KEEP_DATA=1        keep the temporary data directory (its path is printed)
#   RESULTS=file.md    also write the table to this file
#   DROP_CACHES=1      drop the page cache before the restart (needs root; 0 to keep it warm)
#   RUNLEDGER_SRC=dir  source tree to build (default: the one this script is in)
#   CACHE_MB=n         the server's `cache_mb` (default: the binary's own default)
#
# Smoke run: RUNS_SMALL=2000 RUNS_LARGE=5000 DURATION=3 POPULATE_STEP=5 bash benches/load.sh

set -euo pipefail

RUNS_SMALL=${RUNS_SMALL:-100000}
RUNS_LARGE=${RUNS_LARGE:-1000000}
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-64}
POPULATE_STEP=${POPULATE_STEP:-30}
PORT=${PORT:-18080}
CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
export CARGO_TARGET_DIR
HOST=127.0.0.1
BASE="http://$HOST:$PORT"

here=${RUNLEDGER_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
# A relative BIN names a file from where the script was started.
case "${BIN:-}" in ''|/*) ;; *) BIN="$PWD/$BIN" ;; esac
cd "$here"

log() { printf '[load %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# --- tools ------------------------------------------------------------------------------------
if ! command -v wrk >/dev/null 2>&1; then
    log "installing wrk (Debian package)"
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq wrk >/dev/null
fi
command -v curl >/dev/null 2>&1 || die "curl is needed"
command -v python3 >/dev/null 2>&1 || die "python3 is needed (to parse JSON and wrk output)"

if [ -n "${BIN:-}" ]; then
    log "measuring $BIN (BIN: nothing is built)"
else
    log "building the release binary (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
    cargo build --release --quiet
    BIN="$CARGO_TARGET_DIR/release/runledger"
    case "$BIN" in /*) ;; *) BIN="$here/$BIN" ;; esac
fi
[ -x "$BIN" ] || die "no binary at $BIN"

# --- server -----------------------------------------------------------------------------------
WORK=$(mktemp -d /tmp/runledger-load.XXXXXX)
DATA="$WORK/data"
CONFIG="$WORK/runledger.toml"
# server_config PORT DATA_DIR: the [server] and [limits] sections of a server's config.
server_config() {
    cat <<EOF
[server]
bind = "$HOST:$1"
data_dir = "$2"
${CACHE_MB:+cache_mb = $CACHE_MB}

# One key drives all the load; the per-key rate limit would measure itself, and the cap on a
# team's waiting runs would refuse the creates that queue.
[limits]
rate_limit = false
max_queued_per_team = 1000000000
EOF
}
{
    server_config "$PORT" "$DATA"
    cat <<EOF

[[environments]]
id = "bench"
harness = "demo"
demo_duration_ms = 0
max_concurrent = 64
max_queued = 1000000000
EOF
} >"$CONFIG"

SERVER_PID=""
QUEUED_PID=""
# Stops the server with process id $1: SIGTERM, then SIGKILL after 10 s.
stop_pid() {
    local pid=$1
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "server did not stop on SIGTERM within 10 s; killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        wait "$pid" 2>/dev/null || true
    fi
}
stop_server() {
    stop_pid "$SERVER_PID"
    SERVER_PID=""
}
cleanup() {
    stop_pid "$QUEUED_PID"
    stop_server
    if [ "${KEEP_DATA:-0}" = 1 ]; then
        log "kept $WORK"
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Starts the server; sets SERVER_PID and START_NS (when the process was started).
start_server() {
    local n=$1
    START_NS=$(date +%s%N)
    "$BIN" --config "$CONFIG" serve >"$WORK/stdout.$n" 2>"$WORK/stderr.$n" &
    SERVER_PID=$!
}

# Polls /readyz until 200; prints milliseconds since START_NS. Optional: the base URL and the
# process id of another server than the main one.
wait_ready() {
    local base=${1:-$BASE} pid=${2:-$SERVER_PID}
    local deadline=$(( $(date +%s) + 600 ))
    while :; do
        if [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/readyz" 2>/dev/null)" = 200 ]; then
            echo $(( ($(date +%s%N) - START_NS) / 1000000 ))
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || die "server exited; see $WORK/stderr.* and $WORK/queued/stderr"
        [ "$(date +%s)" -lt "$deadline" ] || die "server not ready after 600 s"
        sleep 0.01
    done
}

rss_mb() { awk '/^VmRSS:/ { printf "%.0f", $2 / 1024 }' "/proc/$SERVER_PID/status"; }

metric() { curl -s -H "Authorization: Bearer $KEY" "$BASE/metrics" | awk -v m="$1" '$1 ~ "^"m { s += $2 } END { print s + 0 }'; }

# Waits until no run is queued or executing (the demo agent finishes runs in the background;
# under create load the queue grows faster than 64 slots drain it). Gives up only when the
# backlog has not shrunk for 120 s.
wait_drained() {
    local best=-1 since
    since=$(date +%s)
    while :; do
        local busy
        busy=$(( $(metric runledger_queue_depth) + $(metric runledger_running_executions) ))
        [ "$busy" -eq 0 ] && return 0
        if [ "$best" -lt 0 ] || [ "$busy" -lt "$best" ]; then
            best=$busy
            since=$(date +%s)
        fi
        [ $(( $(date +%s) - since )) -lt 120 ] || die "$busy runs still queued or executing; no progress for 120 s"
        sleep 1
    done
}

# --- wrk helpers --------------------------------------------------------------------------------
# wrk output -> "rps p50_ms p99_ms requests non2xx"
parse_wrk() {
    python3 - "$1" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
def ms(label):
    m = re.search(r'^\s*' + label + r'\s+([\d.]+)(us|ms|s)\s*$', text, re.M)
    if not m:
        return float('nan')
    v, unit = float(m.group(1)), m.group(2)
    return v / 1000 if unit == 'us' else v * 1000 if unit == 's' else v
m = re.search(r'Requests/sec:\s+([\d.]+)', text)
if not m:
    sys.exit("wrk printed no result:\n" + text)
rps = float(m.group(1))
reqs = int(re.search(r'(\d+) requests in', text).group(1))
m = re.search(r'Non-2xx or 3xx responses:\s+(\d+)', text)
bad = int(m.group(1)) if m else 0
m = re.search(r'Socket errors:.*', text)
print(f"{rps:.0f} {ms('50%'):.2f} {ms('99%'):.2f} {reqs} {bad}")
PY
}

# run_wrk NAME SECONDS [wrk args...] URL -> prints the parsed line, keeps the raw output
run_wrk() {
    local name=$1 secs=$2; shift 2
    wrk -t1 -c"$CONNECTIONS" -d"${secs}s" --timeout 10s --latency "$@" >"$WORK/wrk.$name.txt"
    parse_wrk "$WORK/wrk.$name.txt"
}

declare -A R   # results

# --- 1. start, ceiling --------------------------------------------------------------------------
log "data directory $DATA"
start_server 1
wait_ready >/dev/null
KEY=$(head -n1 "$WORK/stdout.1")
case "$KEY" in rl_*) ;; *) die "no API key on the server's first stdout line" ;; esac

# create_lua KEY FILE: the create request every create step sends.
create_lua() {
    cat >"$2" <<EOF
wrk.method = "POST"
wrk.body = '{"prompt":"Fix the flaky integration test in the billing service; keep the API unchanged.","title":"load test run"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $1"
EOF
}
create_lua "$KEY" "$WORK/create.lua"
cat >"$WORK/auth.lua" <<EOF
wrk.headers["Authorization"] = "Bearer $KEY"
EOF

# Sanity: one create must succeed.
code=$(curl -s -o "$WORK/first.json" -w '%{http_code}' -X POST -H "Authorization: Bearer $KEY" \
    -H 'Content-Type: application/json' --data "$(sed -n "s/^wrk.body = '\(.*\)'$/\1/p" "$WORK/create.lua")" \
    "$BASE/api/v1/agent/runs")
[ "$code" = 200 ] || die "a single create answered $code: $(cat "$WORK/first.json")"
CREATED=1

log "GET /healthz, ${DURATION}s"
read -r R[health_rps] R[health_p50] R[health_p99] _ _ < <(run_wrk healthz "$DURATION" "$BASE/healthz")
log "  ${R[health_rps]} req/s, p99 ${R[health_p99]} ms"

# --- 2. durable create ---------------------------------------------------------------------------
# a. On its own: a second server, fresh data directory, the embedded defaults' demo environment
#    (with room in its queue), so that created runs wait in the queue. The main server stays
#    idle meanwhile.
QWORK="$WORK/queued"
QBASE="http://$HOST:$((PORT + 1))"
mkdir -p "$QWORK"
{
    server_config "$((PORT + 1))" "$QWORK/data"
    # The embedded default environment, with room in its queue for every run created here.
    cat <<EOF

[[environments]]
id = "demo"
harness = "demo"
max_queued = 1000000000
EOF
} >"$QWORK/runledger.toml"
START_NS=$(date +%s%N)
"$BIN" --config "$QWORK/runledger.toml" serve >"$QWORK/stdout" 2>"$QWORK/stderr" &
QUEUED_PID=$!
wait_ready "$QBASE" "$QUEUED_PID" >/dev/null
QKEY=$(head -n1 "$QWORK/stdout")
case "$QKEY" in rl_*) ;; *) die "no API key on the second server's first stdout line" ;; esac
create_lua "$QKEY" "$QWORK/create.lua"
log "POST /api/v1/agent/runs (durable create, runs queue), 3 s of warm-up, then ${DURATION}s"
run_wrk create_queued_warmup 3 -s "$QWORK/create.lua" "$QBASE/api/v1/agent/runs" >/dev/null
read -r R[createq_rps] R[createq_p50] R[createq_p99] _ bad < <(run_wrk create_queued "$DURATION" -s "$QWORK/create.lua" "$QBASE/api/v1/agent/runs")
[ "$bad" -eq 0 ] || die "create (runs queue) answered $bad non-2xx responses"
log "  ${R[createq_rps]} req/s, p50 ${R[createq_p50]} ms, p99 ${R[createq_p99]} ms"
stop_pid "$QUEUED_PID"
QUEUED_PID=""
rm -rf "$QWORK/data"

# b. On the main server, whose runs start and finish at once.
log "POST /api/v1/agent/runs (durable create, runs execute at once), ${DURATION}s"
read -r R[create_rps] R[create_p50] R[create_p99] n bad < <(run_wrk create "$DURATION" -s "$WORK/create.lua" "$BASE/api/v1/agent/runs")
[ "$bad" -eq 0 ] || die "create answered $bad non-2xx responses"
CREATED=$((CREATED + n))
log "  ${R[create_rps]} req/s, p50 ${R[create_p50]} ms, p99 ${R[create_p99]} ms ($CREATED runs stored)"
wait_drained
R[create_syncs]=$(metric runledger_durable_syncs_total)

# --- populate ------------------------------------------------------------------------------------
# Creates runs at full speed until at least $1 runs were acknowledged (each 200 is a durable
# run), in rounds of POPULATE_STEP seconds; after each round it waits until the backlog of
# queued runs has been executed, so that the queue (and memory) stays bounded.
populate() {
    local target=$1 started rate=1000
    started=$(date +%s)
    while [ "$CREATED" -lt "$target" ]; do
        local left=$((target - CREATED)) secs=$POPULATE_STEP
        # Size the last round by the rate of the previous ones (at first ~1000 creates/s, a
        # safe lower bound), so that the store ends close to the target rather than a round
        # beyond it: the measurements at RUNS_LARGE are meant for that many runs.
        if [ "$left" -lt $((POPULATE_STEP * rate)) ]; then secs=$(( (left + rate - 1) / rate )); fi
        local line n bad
        line=$(run_wrk populate "$secs" -s "$WORK/create.lua" "$BASE/api/v1/agent/runs")
        read -r _ _ _ n bad <<<"$line"
        [ "$bad" -eq 0 ] || die "populate: $bad non-2xx responses"
        CREATED=$((CREATED + n))
        [ "$n" -gt 0 ] && rate=$(( n / secs > 1000 ? n / secs : 1000 ))
        wait_drained
        log "  populate: $CREATED / $target runs ($(( $(date +%s) - started )) s)"
    done
    # Transcripts are never fsynced (docs/execution.md, "Invariants of agent processes": no fsync of transcripts), so the
    # populate leaves gigabytes of them for the kernel to write back; the reads that follow
    # would share the disk and a core with that writeback. Flush it first.
    local flush_started
    flush_started=$(date +%s)
    sync
    log "  flushed the populate's writes to disk ($(( $(date +%s) - flush_started )) s)"
}

# ids to read: the 500 oldest and the 500 newest runs
pick_ids() {
    : >"$WORK/ids.txt"
    for order in asc desc; do
        curl -s -H "Authorization: Bearer $KEY" "$BASE/api/v1/agent/runs?limit=500&sort_by=created_at&sort_order=$order" |
            python3 -c 'import json,sys; [print(r["run_id"]) for r in json.load(sys.stdin)["runs"]]' >>"$WORK/ids.txt"
    done
    [ -s "$WORK/ids.txt" ] || die "could not list run ids"
    {
        echo "wrk.headers[\"Authorization\"] = \"Bearer $KEY\""
        echo "local ids = {"
        sed 's/.*/"&",/' "$WORK/ids.txt"
        echo "}"
        echo 'math.randomseed(42)'
        echo 'request = function() return wrk.format("GET", "/api/v1/agent/runs/" .. ids[math.random(#ids)]) end'
    } >"$WORK/get.lua"
}

reads() {
    local tag=$1
    pick_ids
    log "GET /api/v1/agent/runs/{id} at $tag runs, ${DURATION}s"
    read -r R[get_${tag}_rps] R[get_${tag}_p50] R[get_${tag}_p99] _ bad < <(run_wrk "get_$tag" "$DURATION" -s "$WORK/get.lua" "$BASE/")
    [ "$bad" -eq 0 ] || die "get-one answered $bad non-2xx responses"
    log "  $(eval echo "\${R[get_${tag}_rps]}") req/s, p99 $(eval echo "\${R[get_${tag}_p99]}") ms"
    log "GET /api/v1/agent/runs?limit=20&state=SUCCEEDED at $tag runs, ${DURATION}s"
    read -r R[list_${tag}_rps] R[list_${tag}_p50] R[list_${tag}_p99] _ bad < <(run_wrk "list_$tag" "$DURATION" -s "$WORK/auth.lua" "$BASE/api/v1/agent/runs?limit=20&state=SUCCEEDED")
    [ "$bad" -eq 0 ] || die "list answered $bad non-2xx responses"
    log "  $(eval echo "\${R[list_${tag}_rps]}") req/s, p99 $(eval echo "\${R[list_${tag}_p99]}") ms"
}

log "populating to $RUNS_SMALL runs"
populate "$RUNS_SMALL"
R[small_runs]=$CREATED
reads small

log "populating to $RUNS_LARGE runs"
populate "$RUNS_LARGE"
R[large_runs]=$CREATED
reads large
sleep 5
R[rss_after_load]=$(rss_mb)
log "RSS idle after the load: ${R[rss_after_load]} MB"
stop_server

# --- restart ---------------------------------------------------------------------------------------
if [ "${DROP_CACHES:-1}" = 1 ] && sync && { echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null; then
    R[cache]="cold page cache"
else
    R[cache]="warm page cache"
fi
log "restarting with $CREATED runs (${R[cache]})"
start_server 2
R[ready_ms]=$(wait_ready)
log "  ready after ${R[ready_ms]} ms"
sleep 5
R[rss_idle]=$(rss_mb)
log "  RSS idle after restart: ${R[rss_idle]} MB"
# The reads again on the restarted server (cold caches).
pick_ids
read -r R[get_restart_rps] _ R[get_restart_p99] _ _ < <(run_wrk get_restart "$DURATION" -s "$WORK/get.lua" "$BASE/")
read -r R[list_restart_rps] _ R[list_restart_p99] _ _ < <(run_wrk list_restart "$DURATION" -s "$WORK/auth.lua" "$BASE/api/v1/agent/runs?limit=20&state=SUCCEEDED")
sleep 2
R[rss_idle_after_reads]=$(rss_mb)
# /metrics: the first scrape counts the runs per state by walking the index's state ranges; the
# later ones read the tally the index keeps as it writes (see docs/operations.md).
scrape_ms() {
    curl -sf -o /dev/null -w '%{time_total}' -H "Authorization: Bearer $KEY" "$BASE/metrics" |
        python3 -c 'import sys; print(f"{float(sys.stdin.read()) * 1000:.1f}")'
}
R[metrics_first_ms]=$(scrape_ms)
R[metrics_next_ms]=$(scrape_ms)
log "  /metrics after the reads: first scrape ${R[metrics_first_ms]} ms, the next ${R[metrics_next_ms]} ms"
# An idle server is scraped (the first scrape walks the index): its memory after that counts too.
sleep 2
R[rss_after_metrics]=$(rss_mb)
log "  RSS idle after the scrapes: ${R[rss_after_metrics]} MB"
R[rss_idle_max]=$(printf '%s\n' "${R[rss_idle]}" "${R[rss_idle_after_reads]}" "${R[rss_after_metrics]}" | sort -n | tail -n1)
stop_server
R[disk]=$(du -sm "$DATA/sled" | cut -f1)

# --- replay ----------------------------------------------------------------------------------------
replay_rate() { sed -n 's/.*(\([0-9]*\) events\/s).*/\1/p' "$1" | tail -n1; }
log "runledger replay --verify"
"$BIN" --config "$CONFIG" replay --verify 2>"$WORK/verify.txt" >"$WORK/verify.out" || die "replay --verify failed: $(cat "$WORK/verify.txt")"
cat "$WORK/verify.txt" >&2
R[verify_eps]=$(replay_rate "$WORK/verify.txt")
R[verify_line]=$(grep -E '^verified' "$WORK/verify.txt" || true)
log "runledger replay"
"$BIN" --config "$CONFIG" replay 2>"$WORK/replay.txt" || die "replay failed: $(cat "$WORK/replay.txt")"
cat "$WORK/replay.txt" >&2
R[replay_eps]=$(replay_rate "$WORK/replay.txt")
R[replay_line]=$(grep -E '^rebuilt' "$WORK/replay.txt" || true)
# The server's own count: runs in the log (wrk does not count requests still in flight at the end
# of a step, so a few more runs exist than acknowledged responses were counted).
R[log_runs]=$(sed -n 's/.* of \([0-9]*\) runs.*/\1/p' "$WORK/replay.txt" | tail -n1)

# --- table -----------------------------------------------------------------------------------------
H=${R[health_rps]}
ratio() { python3 -c "import sys; print(f'{float(sys.argv[1])/float(sys.argv[2]):.2f}')" "$1" "$H"; }
ok() { if python3 -c "import sys; sys.exit(0 if $1 else 1)"; then echo met; else echo MISSED; fi; }
c=${R[create_rps]} q=${R[createq_rps]} g=${R[get_large_rps]} l=${R[list_large_rps]}
table=$(cat <<EOF
| Measure (${CONNECTIONS} connections, wrk -t1, ${DURATION} s) | Figure | × healthz | Target | |
|---|---|---|---|---|
| \`GET /healthz\` (ceiling) | ${H} req/s, p99 ${R[health_p99]} ms | 1.00 | — | |
| durable create \`POST /api/v1/agent/runs\`, runs queue (embedded defaults' environment) | ${q} req/s, p50 ${R[createq_p50]} ms, p99 ${R[createq_p99]} ms | $(ratio "$q") | ≥ 0.25 ×, p99 ≤ 10 ms | $(ok "$q >= 0.25*$H and ${R[createq_p99]} <= 10") |
| durable create, each run also executes at once | ${c} req/s, p50 ${R[create_p50]} ms, p99 ${R[create_p99]} ms | $(ratio "$c") | (as above, were it held to it) | $(ok "$c >= 0.25*$H and ${R[create_p99]} <= 10") |
| get-one, ${R[small_runs]} runs | ${R[get_small_rps]} req/s, p99 ${R[get_small_p99]} ms | $(ratio "${R[get_small_rps]}") | ≥ 0.5 × | $(ok "${R[get_small_rps]} >= 0.5*$H") |
| list \`limit=20&state=SUCCEEDED\`, ${R[small_runs]} runs | ${R[list_small_rps]} req/s, p99 ${R[list_small_p99]} ms | $(ratio "${R[list_small_rps]}") | (≥ 0.1 × at 1M) | |
| get-one, ${R[large_runs]} runs | ${g} req/s, p99 ${R[get_large_p99]} ms | $(ratio "$g") | ≥ 0.5 × | $(ok "$g >= 0.5*$H") |
| list \`limit=20&state=SUCCEEDED\`, ${R[large_runs]} runs | ${l} req/s, p99 ${R[list_large_p99]} ms | $(ratio "$l") | ≥ 0.1 ×, p99 ≤ 10 ms | $(ok "$l >= 0.1*$H and ${R[list_large_p99]} <= 10") |
| get-one / list right after restart, ${R[large_runs]} runs | ${R[get_restart_rps]} / ${R[list_restart_rps]} req/s, p99 ${R[get_restart_p99]} / ${R[list_restart_p99]} ms | | | |
| \`runledger replay\`, ${R[large_runs]} runs | ${R[replay_eps]} events/s | | ≥ 300k events/s | $(ok "${R[replay_eps]:-0} >= 300000") |
| \`runledger replay --verify\`, ${R[large_runs]} runs | ${R[verify_eps]} events/s | | | |
| ready after start, ${R[large_runs]} runs (${R[cache]}) | ${R[ready_ms]} ms | | ≤ 2000 ms | $(ok "${R[ready_ms]} <= 2000") |
| RSS idle after restart, ${R[large_runs]} runs | ${R[rss_idle]} MB (${R[rss_idle_after_reads]} MB after the reads, ${R[rss_after_metrics]} MB after the \`/metrics\` scrapes) | | ≤ 150 MB | $(ok "${R[rss_idle_max]} <= 150") |
| \`/metrics\` after the restart's reads: first scrape / the next, ${R[large_runs]} runs | ${R[metrics_first_ms]} / ${R[metrics_next_ms]} ms | | | |
| RSS idle after the load, ${R[large_runs]} runs | ${R[rss_after_load]} MB | | ≤ 150 MB | $(ok "${R[rss_after_load]} <= 150") |
| sled directory size, ${R[large_runs]} runs | ${R[disk]} MB | | | |
EOF
)
echo
echo "$table"
echo
echo "${R[verify_line]}"
echo "${R[replay_line]}"
echo "runs in the log at the end: ${R[log_runs]} (acknowledged creates counted by wrk: $CREATED)"
echo "durable syncs during the create step: ${R[create_syncs]}"
if [ -n "${RESULTS:-}" ]; then
    {
        echo "$table"
        echo
        echo "${R[verify_line]}"
        echo "${R[replay_line]}"
        echo "runs in the log at the end: ${R[log_runs]} (acknowledged creates counted by wrk: $CREATED)"
    } >"$RESULTS"
fi
