#!/usr/bin/env bash
# Builds strata in release mode and measures planning (see bench-plan.py).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
exec python3 scripts/bench-plan.py target/release/strata "$@"
