#!/usr/bin/env bash
# Build times of a checkout, as docs/performance.md "Build times" reports them: a cold release
# build, release rebuilds after touching a domain file and an HTTP handler, then the same for
# the test build. Each figure is one build in a fresh target directory, removed at the end.
#
#   bash benches/build.sh                          # this checkout
#   DIR=/tmp/old bash benches/build.sh             # another checkout (git worktree add /tmp/old REV)
#   DOMAIN=src/domain/run.rs HTTP=src/http/runs.rs DIR=/tmp/old bash benches/build.sh   # its files
#
# Knobs: DIR (default: this checkout), DOMAIN and HTTP (the files touched, relative to DIR).
set -euo pipefail
DIR=${DIR:-$(cd "$(dirname "$0")/.." && pwd)}
DOMAIN=${DOMAIN:-crates/domain/src/run/decide.rs}
HTTP=${HTTP:-crates/http/src/runs.rs}
cd "$DIR"
[ -f "$DOMAIN" ] && [ -f "$HTTP" ] || { echo "no $DOMAIN or $HTTP under $DIR" >&2; exit 1; }
export CARGO_TARGET_DIR
CARGO_TARGET_DIR=$(mktemp -d "${TMPDIR:-/tmp}/runledger-build.XXXXXX")
trap 'rm -rf "$CARGO_TARGET_DIR"' EXIT

timed() {
    local what=$1; shift
    local start end
    start=$(date +%s.%N)
    "$@" >/dev/null 2>&1
    end=$(date +%s.%N)
    printf '%-48s %6.1f s\n' "$what" "$(echo "$end - $start" | bc)"
}

timed "cold cargo build --release" cargo build --release --quiet
touch "$DOMAIN"; timed "release, after touching $DOMAIN" cargo build --release --quiet
touch "$HTTP"; timed "release, after touching $HTTP" cargo build --release --quiet
timed "cold cargo test --workspace --no-run" cargo test --workspace --no-run --quiet
touch "$DOMAIN"; timed "tests, after touching $DOMAIN" cargo test --workspace --no-run --quiet
touch "$HTTP"; timed "tests, after touching $HTTP" cargo test --workspace --no-run --quiet
