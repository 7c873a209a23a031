#!/usr/bin/env bash
# Runs the agent-CLI suite: the real claude, codex and gemini CLIs (installed by
# scripts/install-agent-clis) complete tool-using tasks against the scripted model server
# (tests/models/server.py) on loopback. Creates its pytest venv under target/ on first use.
#
# Environment:
#   AGENT_CLIS_BIN     directory holding claude, codex, gemini (default: $REPO/target/agent-clis/bin)
#   MODELS_VENV        the pytest virtualenv (default: $REPO/target/models-venv)
#   MODEL_TESTS_KEEP=1 keep every run's private homes under target/models-runs/ (failed ones are kept)
#   PYTHON             the interpreter to build the venv with (default: python3.11, else python3)
# Extra arguments are passed to pytest (e.g. -k claude).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"

PYTEST_VERSION="8.3.4"
VENV="${MODELS_VENV:-$REPO/target/models-venv}"
BIN="${AGENT_CLIS_BIN:-$REPO/target/agent-clis/bin}"

for cli in claude codex gemini; do
    if [[ ! -x "$BIN/$cli" ]]; then
        echo "tests/models/run.sh: no $cli at $BIN/$cli (run scripts/install-agent-clis first)" >&2
        exit 2
    fi
done

# shellcheck source=../venv.sh
source "$HERE/../venv.sh"
ensure_venv "$VENV" "the agent-CLI suite" "pytest==$PYTEST_VERSION"

mkdir -p "$REPO/target/models-runs"
cd "$HERE"
AGENT_CLIS_BIN="$BIN" PYTHONDONTWRITEBYTECODE=1 \
    "$VENV/bin/python" -m pytest "$HERE" -p no:cacheprovider -q "$@"
