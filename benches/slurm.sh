#!/usr/bin/env bash
# Execution on Slurm (see benches/slurm.py) against real clusters of tests/slurm/cluster.sh on
# this machine: create → agent start with runs_on = "slurm" against "local", the throughput of a
# fixed-length agent on 1, 2 and 3 nodes, and the server's CPU and memory with many runs in
# progress. Not run by CI; as root; about ten minutes with the defaults. Knobs: LATENCY_RUNS
# (100), RUNS_PER_NODE (40), AGENT_SECS (2), MAX_NODES (3), LIVE_RUNS (200), LIVE_NODES (4),
# WINDOW_SECS (30), PARTS (latency,throughput,live), RESULTS (a file for the tables), TIMELINE=1
# (each throughput run's times on stderr), SLURM_CONF_EXTRA (lines for every cluster's slurm.conf).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --bin runledger
RUNLEDGER_BIN="${CARGO_TARGET_DIR:-target}/release/runledger" python3 benches/slurm.py
