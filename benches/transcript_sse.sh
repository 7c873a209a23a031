#!/usr/bin/env bash
# What following a transcript live costs: an agent's throughput with and without SSE followers,
# and server memory with idle followers (see benches/transcript_sse.py). Not run by CI; a few
# minutes. Sizes: OUTPUT_MB (50), FOLLOWERS (100), ROUNDS (9), IDLE_FOLLOWERS (1000).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --bin runledger
RUNLEDGER_BIN="${CARGO_TARGET_DIR:-target}/release/runledger" python3 benches/transcript_sse.py
