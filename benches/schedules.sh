#!/usr/bin/env bash
# Schedule figures (see benches/schedules.py): with 10,000 schedules stored, the create rate,
# the idle server's memory, the start time to /readyz, and the firing lag (due time to the run
# durable) p50/p99 in the seconds test mode, for a burst (each schedule once a minute at its own
# second) and a steady state (100 every second). Not run by CI; about eight minutes. Knobs:
# SCHEDULES (10000), CLIENTS (16), ROUNDS (5), IDLE_SECS (5), BURST_SECS (150), STEADY_SECS (60),
# STEADY_FIRING (100), SAME_SECOND (0; 1 adds every schedule due at the same second), SAMPLE (200),
# PARTS (start,burst,steady).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --bin runledger
RUNLEDGER_BIN="${CARGO_TARGET_DIR:-target}/release/runledger" python3 benches/schedules.py
