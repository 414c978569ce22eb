#!/usr/bin/env bash
# The crash test of issue 10, long form: kill -9 strata at random points of a run of the
# `local` profile ROUNDS times (default 50), each followed by `up --resume`; fails on a
# round that does not end with every project succeeded, or on two runs of one project
# at once. Prints rounds, kills and overlaps. Usage: scripts/crash-test.sh [ROUNDS] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
CRASH_ROUNDS="${1:-50}" CRASH_SEED="${2:-20261124}" \
  cargo test --quiet --test integration crash:: -- --nocapture --test-threads 1 2>&1 |
  grep -E "crash test:|panicked|round [0-9]+|test result"
