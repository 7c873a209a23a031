#!/usr/bin/env bash
# One run's bundle at the size issue #39 names: a run of 100,000 events (the store
# `benches/travel.rs` builds, kept with TRAVEL_KEEP) with a 50 MB transcript, exported with
# `runledger export --run`, imported with `runledger import --run` into another store, and
# opened with `runledger inspect` (until it listens and has answered the run's GET). Prints
# the wall time and peak RSS (/usr/bin/time -v) of each. Not run by CI; needs /usr/bin/time
# and curl. Knobs: TRAVEL_EVENTS (100000), TRANSCRIPT_MB (50), KEEP=1 keeps the directory.
set -euo pipefail
cd "$(dirname "$0")/.."
TRANSCRIPT_MB=${TRANSCRIPT_MB:-50}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
cargo build --release --quiet --bin runledger
BIN="$CARGO_TARGET_DIR/release/runledger"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/runledger-bundle-bench.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/source"

# The store: one run of TRAVEL_EVENTS events (built through the store, as travel does).
TRAVEL_KEEP="$WORK/source/data" cargo bench --quiet --bench travel >"$WORK/travel.txt"
ID=$(sed -n 's/^run id //p' "$WORK/travel.txt" | head -n1)
[ -n "$ID" ] || { echo "benches/travel.rs printed no run id" >&2; exit 1; }
mkdir -p "$WORK/source/data/transcripts"
# A transcript of TRANSCRIPT_MB MB of JSON lines, as the executor writes them.
python3 - "$WORK/source/data/transcripts/$ID.jsonl" "$TRANSCRIPT_MB" <<'PY'
import json, sys
path, mb = sys.argv[1], int(sys.argv[2])
line = json.dumps({"at": "2026-01-01T00:00:00.000Z", "execution": 1, "stream": "stdout",
                   "text": "x" * 900}) + "\n"
with open(path, "w") as f:
    for _ in range(mb * 1024 * 1024 // len(line)):
        f.write(line)
PY

measure() {
    local what=$1; shift
    /usr/bin/time -v "$@" 2>"$WORK/time.txt" >/dev/null || { cat "$WORK/time.txt" >&2; exit 1; }
    local wall rss
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$WORK/time.txt")
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$WORK/time.txt")
    printf '%-8s %10s wall  %6d MiB peak RSS\n' "$what" "$wall" $((rss / 1024))
}

BUNDLE="$WORK/run.bundle"
measure export "$BIN" export --run "$ID" --output "$BUNDLE" --data-dir "$WORK/source/data"
ls -l "$BUNDLE" | awk '{printf "bundle   %d MB\n", $5 / 1000000}'

# An existing, empty store to import into (an empty backup makes one).
"$BIN" import /dev/null --data-dir "$WORK/target/data" 2>/dev/null
measure import "$BIN" import --run "$BUNDLE" --data-dir "$WORK/target/data"

# inspect: from its start until it has answered the run's GET, then stopped with SIGINT.
/usr/bin/time -v "$BIN" inspect "$BUNDLE" --bind 127.0.0.1:0 \
    >"$WORK/inspect.out" 2>"$WORK/inspect.err" &
TIMER=$!
START=$(date +%s.%N)
for _ in $(seq 1 600); do
    grep -q '^runledger listening on ' "$WORK/inspect.err" && [ -s "$WORK/inspect.out" ] && break
    sleep 0.01
done
BASE=$(sed -n 's/^runledger listening on //p' "$WORK/inspect.err" | head -n1)
KEY=$(tail -n1 "$WORK/inspect.out")
curl -sf -o /dev/null -H "Authorization: Bearer $KEY" "$BASE/api/v1/agent/runs/$ID"
END=$(date +%s.%N)
SERVER=$(pgrep -P "$TIMER")
kill -INT "$SERVER"
wait "$TIMER" || true
rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$WORK/inspect.err")
printf '%-8s %10.2f s to the first answer  %6d MiB peak RSS\n' inspect \
    "$(echo "$END - $START" | bc)" $((rss / 1024))
