#!/usr/bin/env bash
# What an execution changed, at the size issue #40 names: a repository of FILES files (10,000)
# of which CHANGED (100) are modified by a command agent; the server computes the run's changes
# when the agent exits (git as the agent, in its sandbox: a copy of the index, `add -A`,
# `write-tree`, the summary, the patch). Prints the time the execution's transcript reports
# ("changes: … computed in N ms"), then the same git steps run directly on the workspace the
# run left, under /usr/bin/time -v, for their peak RSS (the largest git process). Not run by CI;
# needs git, curl, python3 and /usr/bin/time. Knobs: FILES, CHANGED, RUNLEDGER_BIN (default: a
# release build), KEEP=1 keeps the directory.
set -euo pipefail
cd "$(dirname "$0")/.."
FILES=${FILES:-10000}
CHANGED=${CHANGED:-100}
if [ -z "${RUNLEDGER_BIN:-}" ]; then
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
    cargo build --release --quiet --bin runledger
    RUNLEDGER_BIN="$CARGO_TARGET_DIR/release/runledger"
fi
# Agents of a root server run as uids of their own: the repository must be readable by them.
DIR=$(mktemp -d /var/tmp/runledger-changes.XXXXXX)
chmod 755 "$DIR"
SERVER=
cleanup() {
    [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
    [ "${KEEP:-0}" = 1 ] || rm -rf "$DIR"
}
trap cleanup EXIT
g() { git -c user.name=b -c user.email=b@example.com -c safe.directory='*' "$@"; }

git init -q --bare -b main "$DIR/origin.git"
g clone -q "$DIR/origin.git" "$DIR/work" 2>/dev/null
cd "$DIR/work"
g checkout -q -b main
python3 - "$FILES" <<'PY'
import os, sys
n = int(sys.argv[1])
for i in range(n):
    d = f"d{i // 100:03d}"
    os.makedirs(d, exist_ok=True)
    with open(f"{d}/f{i % 100:02d}.txt", "w") as f:
        f.write("".join(f"line {j} of file {i}\n" for j in range(20)))
PY
g add -A && g commit -q -m base && g push -q origin main
cd - >/dev/null

cat > "$DIR/agent.sh" <<AGENT
#!/bin/sh
set -e
i=0
for f in \$(ls -d d*/f00.txt d*/f01.txt d*/f02.txt | head -n $CHANGED); do
    echo "changed by the agent" >> "\$f"
done
echo done
AGENT
chmod 755 "$DIR/agent.sh"
cat > "$DIR/runledger.toml" <<TOML
[server]
bind = "127.0.0.1:0"

[[environments]]
id = "bench"
harness = "command"
command = ["$DIR/agent.sh"]
max_runtime_secs = 600
repos = [{ url = "file://$DIR/origin.git" }]
TOML

"$RUNLEDGER_BIN" serve --config "$DIR/runledger.toml" --data-dir "$DIR/data" \
    > "$DIR/stdout" 2> "$DIR/stderr" &
SERVER=$!
for _ in $(seq 1 300); do
    grep -q "runledger listening on" "$DIR/stderr" 2>/dev/null && [ -s "$DIR/stdout" ] && break
    sleep 0.1
done
BASE="$(sed -n 's/^runledger listening on //p' "$DIR/stderr" | head -n 1)"
KEY=$(head -n 1 "$DIR/stdout")
ID=$(curl -sf -H "Authorization: Bearer $KEY" -H 'content-type: application/json' \
    -d '{"prompt":"change","config":{"environment_id":"bench"}}' "$BASE/api/v1/agent/runs" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["run_id"])')
for _ in $(seq 1 1200); do
    STATE=$(curl -sf -H "Authorization: Bearer $KEY" "$BASE/api/v1/agent/runs/$ID" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
    case $STATE in SUCCEEDED|FAILED|CANCELLED) break ;; esac
    sleep 0.2
done
echo "run $ID: $STATE"
curl -sf -H "Authorization: Bearer $KEY" "$BASE/api/v1/agent/runs/$ID/transcript?limit=1000" |
    python3 -c '
import json, sys
for e in json.load(sys.stdin).get("entries", []):
    if e.get("text", "").startswith("changes: "):
        print("server:", e["text"])'
curl -sf -H "Authorization: Bearer $KEY" "$BASE/api/v1/agent/runs/$ID/changes" |
    python3 -c 'import json,sys; t=json.load(sys.stdin)["total"]; print("summary:", t)'

# The same steps by hand, for their memory: a copy of the index, add, write-tree, diff.
WS="$DIR/data/workspaces/$ID"
BASE_COMMIT=$(g -C "$DIR/work" rev-parse HEAD)
export GIT_INDEX_FILE="$DIR/bench-index" GIT_DIR="$WS/.git" GIT_WORK_TREE="$WS"
cp "$WS/.git/index" "$GIT_INDEX_FILE"
G=(git -c safe.directory='*' -c core.fsmonitor=false)
/usr/bin/time -f "by hand: add -A: %e s, %M KiB peak RSS" "${G[@]}" add -A
TREE=$(g write-tree)
/usr/bin/time -f "by hand: summary: %e s, %M KiB peak RSS" \
    "${G[@]}" diff --raw --numstat -z -M --no-abbrev "$BASE_COMMIT" "$TREE" > /dev/null
/usr/bin/time -f "by hand: patch: %e s, %M KiB peak RSS" \
    "${G[@]}" diff --binary -M --full-index "$BASE_COMMIT" "$TREE" > "$DIR/patch"
echo "patch: $(wc -c < "$DIR/patch") bytes"
