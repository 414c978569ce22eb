#!/usr/bin/env bash
# Builds strata in release mode and measures what the secrets store costs (bench-store.py).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q --bin strata
exec python3 scripts/bench-store.py --strata target/release/strata "$@"
