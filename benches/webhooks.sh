#!/usr/bin/env bash
# Webhook figures (see benches/webhooks.py): delivery latency from a run's terminal event to a
# local receiver with 100 subscriptions, and the create rate while a receiver that answers in
# 5 s leaves deliveries owed. Not run by CI; about four minutes. Knobs: RUNS (200),
# SUBSCRIPTIONS (100), DURATION (10), SLOW_SECS (5), ROUNDS (3). Needs wrk.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null 2>&1 || { echo "wrk is needed (benches/load.sh installs it)" >&2; exit 1; }
cargo build --release --quiet --bin runledger
RUNLEDGER_BIN="${CARGO_TARGET_DIR:-target}/release/runledger" python3 benches/webhooks.py
