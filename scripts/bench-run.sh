#!/usr/bin/env bash
# Builds strata and the fake pulumi in release mode and measures runs (see bench-run.py).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q --workspace
exec python3 scripts/bench-run.py --strata target/release/strata --pulumi target/release/pulumi "$@"
