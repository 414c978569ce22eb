#!/usr/bin/env bash
# Builds strata in release mode and measures the peak memory of its runs (bench-memory.py).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q --bin strata
exec python3 scripts/bench-memory.py --strata target/release/strata "$@"
