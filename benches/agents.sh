#!/usr/bin/env bash
# Execution figures with real child processes (see benches/agents.py). Not run by CI.
# Sizes: CONCURRENT_RUNS (200), LATENCY_RUNS (200), LIVE_AGENTS (1000), OUTPUT_BYTES (100 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --bin runledger
RUNLEDGER_BIN="${CARGO_TARGET_DIR:-target}/release/runledger" python3 benches/agents.py
