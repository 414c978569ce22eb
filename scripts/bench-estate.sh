#!/usr/bin/env bash
# Builds strata in release mode and runs a 1,000-project estate against a fake cloud
# that throttles: adaptive pools vs the best fixed limits (bench-estate.py).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q --bin strata
exec python3 scripts/bench-estate.py --strata target/release/strata "$@"
