#!/usr/bin/env bash
# runledger's overhead on a real agent CLI run (see benches/cli_overhead.py). Not run by CI.
# OVERHEAD_CLI (claude | codex | gemini, default claude), OVERHEAD_RUNS (20).
# Needs the agent CLIs (scripts/install-agent-clis) and the suite's venv (tests/models/run.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --bin runledger
scripts/install-agent-clis >/dev/null
RUNLEDGER_BIN="${CARGO_TARGET_DIR:-target}/release/runledger" \
    PYTHONDONTWRITEBYTECODE=1 "${MODELS_VENV:-target/models-venv}/bin/python" benches/cli_overhead.py
