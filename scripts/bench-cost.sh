#!/usr/bin/env bash
# Builds strata in release mode and measures its own cost against make -j4 (bench-cost.py).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q --bin strata
exec python3 scripts/bench-cost.py --strata target/release/strata "$@"
