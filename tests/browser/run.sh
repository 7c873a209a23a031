#!/usr/bin/env bash
# Drives the web console in a real browser: the distribution's headless Chromium
# (/usr/bin/chromium, installed with apt-get when missing), through Playwright for Python
# pointed at that binary (no browser is ever downloaded by Playwright). The tests start the real
# server themselves. The caller builds the binary first (`cargo build`).
#
# Environment:
#   RUNLEDGER_BIN     the server binary (default: $REPO/target/debug/runledger)
#   CHROMIUM          the browser (default: /usr/bin/chromium)
#   BROWSER_VENV      the virtualenv (default: $REPO/target/browser-venv)
#   SCREENSHOT_DIR    where screenshots go (default: $REPO/target/browser-screenshots)
#   PYTHON            the interpreter to build the venv with (default: python3.11, else python3)
# Extra arguments are passed to pytest.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"

PLAYWRIGHT_VERSION="1.65.2"
PYTEST_VERSION="8.3.4"
BIN="${RUNLEDGER_BIN:-$REPO/target/debug/runledger}"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
VENV="${BROWSER_VENV:-$REPO/target/browser-venv}"
SCREENSHOT_DIR="${SCREENSHOT_DIR:-$REPO/target/browser-screenshots}"

if [[ ! -x "$BIN" ]]; then
    echo "tests/browser/run.sh: no runledger binary at $BIN (run 'cargo build' first, or set RUNLEDGER_BIN)" >&2
    exit 2
fi
BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"

if [[ ! -x "$CHROMIUM" ]]; then
    echo "==> installing the distribution's chromium" >&2
    SUDO=""
    if [[ "$(id -u)" -ne 0 ]]; then
        SUDO="sudo"
    fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

# shellcheck source=../venv.sh
source "$HERE/../venv.sh"
ensure_venv "$VENV" "playwright==$PLAYWRIGHT_VERSION" "playwright==$PLAYWRIGHT_VERSION" \
    "pytest==$PYTEST_VERSION"

mkdir -p "$SCREENSHOT_DIR"
cd "$REPO"
RUNLEDGER_BIN="$BIN" CHROMIUM="$CHROMIUM" SCREENSHOT_DIR="$SCREENSHOT_DIR" \
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 PYTHONDONTWRITEBYTECODE=1 \
    "$VENV/bin/python" -m pytest "$HERE" -p no:cacheprovider -q "$@"
