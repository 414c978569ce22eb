#!/usr/bin/env bash
# Builds strata in release mode and the real Pulumi (scripts/install-pulumi.sh, cached),
# then measures strata against the real CLI on the local-pulumi profile (bench-real.py).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q --bin strata
pulumi_dir=$(bash scripts/install-pulumi.sh)
exec python3 scripts/bench-real.py --strata target/release/strata --pulumi-dir "$pulumi_dir" "$@"
