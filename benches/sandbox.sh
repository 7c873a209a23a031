#!/usr/bin/env bash
# Cost of containment (see benches/sandbox.py): create → first output line with and without
# bubblewrap, and a 10k-file repository's checkout, first and second run. Not run by CI.
# Sizes: STARTUP_RUNS (100), REPO_FILES (10000).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --bin runledger
RUNLEDGER_BIN="${CARGO_TARGET_DIR:-target}/release/runledger" python3 benches/sandbox.py
