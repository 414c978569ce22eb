#!/usr/bin/env bash
# Builds strata in release mode, the real Pulumi with its Kubernetes provider
# (scripts/install-pulumi.sh) and the control plane (scripts/install-kube.sh), both
# cached, then measures strata against the real CLI on the local-pulumi and local-kube
# profiles side by side in one run (bench-real.py; `--profile NAME` for one, `--backend s3`
# for an S3 bucket, scripts/install-s3.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q --bin strata
pulumi_dir=$(bash scripts/install-pulumi.sh)
kube_dir=$(bash scripts/install-kube.sh)
exec python3 scripts/bench-real.py --strata target/release/strata --pulumi-dir "$pulumi_dir" --kube-dir "$kube_dir" "$@"
