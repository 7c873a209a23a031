#!/usr/bin/env bash
# Durable create of two saved builds, alternated in one sitting (old, new, old, new, ...), as
# docs/performance.md ("Create path against 3db3b62") describes. NOT run in CI; about 40 s a round.
#
# Each round runs benches/create.sh once with BIN=OLD, then once with BIN=NEW, and the table at
# the end gives every round's rate and server CPU per create, the medians of each build and the
# ratios new/old (rate: higher is better; CPU: lower is better). The machine's speed moves
# between runs, so only builds measured in the same sitting, alternated, compare; CPU per create
# is the steadier figure.
#
# Knobs: OLD=path NEW=path (release binaries; required)  ROUNDS=2  DEMO_MS=2000  DURATION=10
#        and the other knobs of benches/create.sh (CONNECTIONS, PORT).

set -euo pipefail

: "${OLD:?OLD=path of the older release binary}"
: "${NEW:?NEW=path of the newer release binary}"
ROUNDS=${ROUNDS:-2}
export DEMO_MS=${DEMO_MS:-2000}
export DURATION=${DURATION:-10}
cd "$(dirname "$0")/.."

OUT=$(mktemp /tmp/runledger-create-vs.XXXXXX)
trap 'rm -f "$OUT"' EXIT
for round in $(seq 1 "$ROUNDS"); do
    for build in old new; do
        if [ "$build" = old ]; then bin=$OLD; else bin=$NEW; fi
        figures=$(BIN="$bin" PERF=0 bash benches/create.sh 2>&1)
        # The second "Requests/sec" line is the create's (the first is /healthz).
        rate=$(echo "$figures" | awk '/Requests\/sec/ {r = $2} END {print r}')
        cpu=$(echo "$figures" | awk '/server CPU per create/ {print $5}')
        echo "$build $round $rate $cpu" | tee -a "$OUT" >&2
    done
done

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo "| Round | old req/s | new req/s | old µs CPU/create | new µs CPU/create |"
echo "|---|---|---|---|---|"
for round in $(seq 1 "$ROUNDS"); do
    awk -v r="$round" '$2 == r && $1 == "old" {or = $3; oc = $4} $2 == r && $1 == "new" {nr = $3; nc = $4}
        END {printf "| %d | %.0f | %.0f | %.1f | %.1f |\n", r, or, nr, oc, nc}' "$OUT"
done
old_rate=$(awk '$1 == "old" {print $3}' "$OUT" | median)
new_rate=$(awk '$1 == "new" {print $3}' "$OUT" | median)
old_cpu=$(awk '$1 == "old" {print $4}' "$OUT" | median)
new_cpu=$(awk '$1 == "new" {print $4}' "$OUT" | median)
awk -v or="$old_rate" -v nr="$new_rate" -v oc="$old_cpu" -v nc="$new_cpu" 'BEGIN {
    printf "| median | %.0f | %.0f | %.1f | %.1f |\n", or, nr, oc, nc
    printf "\nnew/old: rate %.3f x, CPU per create %.3f x\n", nr / or, nc / oc }'
