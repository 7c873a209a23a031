#!/usr/bin/env bash
# Server memory under bursts of large responses (see benches/output.py). Not run by CI; about
# two minutes. Sizes: HISTORY_EVENTS (20000), FOLLOWUP_BYTES (1100), CLIENTS (40),
# TRANSCRIPT_MB (64).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --bin runledger
RUNLEDGER_BIN="${CARGO_TARGET_DIR:-target}/release/runledger" python3 benches/output.py
