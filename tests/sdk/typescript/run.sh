#!/usr/bin/env bash
# The README's TypeScript example, as a user would meet it: type-checked against the official
# TypeScript client from npm (`oz-agent-sdk`, pinned below) with strict settings, then run with
# Node against the real server, configured only through the variables the client reads
# (`WARP_API_KEY`, `OZ_API_BASE_URL`). Fails if the example no longer compiles, or its run does
# not reach SUCCEEDED. The caller builds the binary first.
#
# Environment:
#   RUNLEDGER_BIN   the server binary (default: $REPO/target/debug/runledger)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
BIN="${RUNLEDGER_BIN:-$REPO/target/debug/runledger}"
SDK_VERSION="1.0.0-alpha.8"
TYPESCRIPT_VERSION="5.9.3"

if [[ ! -x "$BIN" ]]; then
    echo "tests/sdk/typescript/run.sh: no runledger binary at $BIN" >&2
    exit 2
fi

WORK="$REPO/target/ts-example"
stamp="$WORK/.pins-$SDK_VERSION-$TYPESCRIPT_VERSION"
if [[ ! -f "$stamp" ]]; then
    echo "==> installing oz-agent-sdk@$SDK_VERSION and typescript@$TYPESCRIPT_VERSION from npm" >&2
    rm -rf "$WORK"
    mkdir -p "$WORK"
    echo '{"private": true}' >"$WORK/package.json"
    (cd "$WORK" && npm install --silent --no-audit --no-fund \
        "oz-agent-sdk@$SDK_VERSION" "typescript@$TYPESCRIPT_VERSION")
    touch "$stamp"
fi

# The README's only ```ts block, verbatim.
awk '/^```ts$/{on=1; next} /^```$/{if (on) exit} on' "$REPO/README.md" >"$WORK/example.mts"
if [[ ! -s "$WORK/example.mts" ]]; then
    echo "tests/sdk/typescript/run.sh: README.md has no \`\`\`ts block" >&2
    exit 1
fi
rm -rf "$WORK/out"
(cd "$WORK" && node_modules/.bin/tsc --strict --module nodenext --target es2022 \
    --lib es2022,dom --outDir out example.mts)

# shellcheck source=../../serve.sh
source "$REPO/tests/serve.sh"
DATA="$(mktemp -d)"
SERVER_PID=""
cleanup() {
    if [[ -n "$SERVER_PID" ]]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$DATA"
}
trap cleanup EXIT
printf '[server]\nbind = "127.0.0.1:0"\n' >"$DATA/config.toml"
start_server tests/sdk/typescript/run.sh "$BIN" "$DATA"

out="$(cd "$WORK" && OZ_API_BASE_URL="$ROOT/api/v1" WARP_API_KEY="$KEY" \
    timeout 60 node out/example.mjs)"
echo "$out"
if ! grep -q ' SUCCEEDED$' <<<"$out"; then
    echo "tests/sdk/typescript/run.sh: the example's run did not succeed" >&2
    exit 1
fi
echo "tests/sdk/typescript: the README example compiles and its run succeeded"
