#!/bin/sh
# The hostile-load suite (tests/hostile.rs) at a large scale, in release: a session flood,
# abandoned sessions across a kill -9 restart, and a restart over many ended sessions. Prints
# the figures benches/RESULTS.md ("Hostile load") records. Usage: scripts/hostile-load.sh [SCALE]
# (default 20: 100 000 flood requests, 4 000 abandoned sessions, 6 000 ended sessions of 20
# events each). Loopback only; each test is bounded by its scale.
set -eu
cd "$(dirname "$0")/.."
WARDEN_HOSTILE_SCALE="${1:-20}" cargo test --release --test hostile -- --nocapture --test-threads=1 2>&1 |
  grep -E '^(flood|abandoned|ended):|^test |test result'
