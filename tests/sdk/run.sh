#!/usr/bin/env bash
# Drives a real runledger server with the official Python client `oz-agent-sdk`, once per pinned
# SDK version, with strict response validation. The caller builds the binary first
# (`cargo build`); this script never builds it.
#
# Environment:
#   RUNLEDGER_BIN   the server binary (default: $REPO/target/debug/runledger)
#   SDK_VENV_ROOT   where the per-version virtualenvs live (default: $REPO/target/sdk-venvs)
#   SDK_VERSIONS    space-separated versions to test (default: all pinned below)
#   PYTHON          the interpreter to build venvs with (default: python3.11, else python3)
# Extra arguments are passed to pytest.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"

PYTEST_VERSION="8.3.4"
# The Standard Webhooks reference library, which verifies deliveries in test_webhooks.py.
STANDARDWEBHOOKS_VERSION="1.1.0"
DEFAULT_VERSIONS="0.15.0 0.10.1"
VERSIONS="${SDK_VERSIONS:-$DEFAULT_VERSIONS}"
VENV_ROOT="${SDK_VENV_ROOT:-$REPO/target/sdk-venvs}"
BIN="${RUNLEDGER_BIN:-$REPO/target/debug/runledger}"

if [[ ! -x "$BIN" ]]; then
    echo "tests/sdk/run.sh: no runledger binary at $BIN (run 'cargo build' first, or set RUNLEDGER_BIN)" >&2
    exit 2
fi
BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"

# Pin the binary for the whole run: a hard link (or copy) keeps this exact build even if
# `cargo build` replaces the original meanwhile.
mkdir -p "$REPO/target"
PINNED="$(mktemp -d "$REPO/target/sdk-bin.XXXXXX")"
trap 'rm -rf "$PINNED"' EXIT
ln "$BIN" "$PINNED/runledger" 2>/dev/null || cp "$BIN" "$PINNED/runledger"
BIN="$PINNED/runledger"

# shellcheck source=../venv.sh
source "$HERE/../venv.sh"

failed=()
for version in $VERSIONS; do
    venv="$VENV_ROOT/$version"
    ensure_venv "$venv" "oz-agent-sdk==$version" "oz-agent-sdk==$version" "pytest==$PYTEST_VERSION" \
        "standardwebhooks==$STANDARDWEBHOOKS_VERSION"
    echo "==> oz-agent-sdk $version" >&2
    if ! (
        cd "$REPO"
        RUNLEDGER_BIN="$BIN" OZ_SDK_VERSION="$version" PYTHONDONTWRITEBYTECODE=1 \
            "$venv/bin/python" -m pytest "$HERE" -p no:cacheprovider -q "$@"
    ); then
        failed+=("$version")
    fi
done

if ((${#failed[@]})); then
    echo "tests/sdk/run.sh: FAILED for oz-agent-sdk ${failed[*]}" >&2
    exit 1
fi
echo "tests/sdk/run.sh: all SDK versions passed ($VERSIONS)" >&2
