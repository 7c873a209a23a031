#!/usr/bin/env bash
# The console's runs page with many runs in the store (issue 22, point 5): the server's time to
# first byte of `GET /runs` (the page with its first 20 runs rendered on the server), p50 and
# p99, for a signed-in session. NOT run in CI. See docs/performance.md, "The console".
#
# The store is built by benches/load.sh (its populate step, kept with KEEP_DATA=1), or reused:
# DATA=<data directory> (for example the `data` directory of a kept load.sh run).
#
# Knobs (environment variables):
#   RUNS=1000000     runs to build when DATA is not given
#   REQUESTS=1000    measured requests per page (after 50 of warm-up)
#   DATA=dir         an existing data directory (nothing is built; it is not removed)
#   BIN=path         the binary to measure (default: the release build, built here)
#   PORT=18090       listen port (127.0.0.1 only)
#
# Smoke run (about two minutes): RUNS=5000 REQUESTS=200 bash benches/console.sh

set -euo pipefail

RUNS=${RUNS:-1000000}
REQUESTS=${REQUESTS:-1000}
PORT=${PORT:-18090}
BASE="http://127.0.0.1:$PORT"
here=$(cd "$(dirname "$0")/.." && pwd)
case "${BIN:-}" in ''|/*) ;; *) BIN="$PWD/$BIN" ;; esac
case "${DATA:-}" in ''|/*) ;; *) DATA="$PWD/$DATA" ;; esac
cd "$here"

log() { printf '[console %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
command -v curl >/dev/null 2>&1 || die "curl is needed"
command -v python3 >/dev/null 2>&1 || die "python3 is needed"

if [ -z "${BIN:-}" ]; then
    log "building the release binary"
    cargo build --release --quiet
    BIN="$here/${CARGO_TARGET_DIR:-target}/release/runledger"
fi
[ -x "$BIN" ] || die "no binary at $BIN"

WORK=$(mktemp -d /tmp/runledger-console.XXXXXX)
SERVER_PID=""
BUILT=""
cleanup() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
    [ -z "$BUILT" ] || rm -rf "$BUILT"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "${DATA:-}" ]; then
    log "building a store of $RUNS runs with benches/load.sh (its measurements are a by-product)"
    KEEP_DATA=1 RUNS_SMALL="$RUNS" RUNS_LARGE="$RUNS" DURATION=2 BIN="$BIN" PORT=$((PORT + 10)) \
        bash benches/load.sh >"$WORK/load.out" 2>"$WORK/load.err" \
        || { tail -20 "$WORK/load.err" >&2; die "benches/load.sh failed"; }
    BUILT=$(sed -n 's/.*\] kept \(.*\)$/\1/p' "$WORK/load.err" | tail -1)
    [ -d "$BUILT/data" ] || die "benches/load.sh kept no data directory"
    DATA="$BUILT/data"
fi
[ -d "$DATA" ] || die "no data directory at $DATA"

# The environment of load.sh's runs, so that the server knows it; no rate limit (one key
# drives all the requests).
cat >"$WORK/runledger.toml" <<CONF
[server]
bind = "127.0.0.1:$PORT"
data_dir = "$DATA"

[limits]
rate_limit = false

[[environments]]
id = "bench"
harness = "demo"
demo_duration_ms = 0
CONF

# A key made with the server stopped (the command line writes the store directly).
KEY=$("$BIN" keys create --config "$WORK/runledger.toml" --name console-bench --admin)
"$BIN" serve --config "$WORK/runledger.toml" >"$WORK/stdout" 2>"$WORK/stderr" &
SERVER_PID=$!
for _ in $(seq 1 600); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/readyz" || true)" = 200 ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/stderr" >&2; die "the server exited"; }
    sleep 0.1
done
STORED=$(curl -s -H "Authorization: Bearer $KEY" "$BASE/metrics" | python3 -c '
import sys
print(sum(int(float(l.split()[-1])) for l in sys.stdin if l.startswith("runledger_runs{")))')
log "server ready with $STORED runs"

# Sign in as a browser does: the form's token and its cookie, then the key.
JAR="$WORK/cookies"
TOKEN=$(curl -s -c "$JAR" "$BASE/signin" | sed -n 's/.*name="token" value="\([^"]*\)".*/\1/p')
[ -n "$TOKEN" ] || die "no sign-in token"
curl -s -o /dev/null -b "$JAR" -c "$JAR" --data-urlencode "token=$TOKEN" \
    --data-urlencode "key=$KEY" "$BASE/signin"
grep -q runledger_session "$JAR" || die "sign-in failed"

# measure PATH: p50 and p99 of the time to first byte, in ms.
measure() {
    local path=$1 out="$WORK/ttfb"
    local code
    code=$(curl -s -o /dev/null -w '%{http_code}' -b "$JAR" "$BASE$path")
    [ "$code" = 200 ] || die "GET $path answered $code"
    for _ in $(seq 1 50); do curl -s -o /dev/null -b "$JAR" "$BASE$path"; done
    : >"$out"
    for _ in $(seq 1 "$REQUESTS"); do
        curl -s -o /dev/null -b "$JAR" -w '%{time_starttransfer}\n' "$BASE$path" >>"$out"
    done
    python3 - "$out" "$path" <<'PY'
import sys
xs = sorted(float(l) * 1000 for l in open(sys.argv[1]) if l.strip())
q = lambda p: xs[min(len(xs) - 1, int(p * len(xs)))]
print(f"| `GET {sys.argv[2]}` | {len(xs)} | {q(0.5):.2f} | {q(0.99):.2f} |")
PY
}

echo "runs page TTFB with $STORED runs stored ($(basename "$BIN"), $(nproc) cores)"
echo
echo "| page | requests | p50 ms | p99 ms |"
echo "|---|---|---|---|"
measure "/runs"
measure "/runs?state=SUCCEEDED&limit=100"
measure "/runs?sort_by=created_at&sort_order=asc"
