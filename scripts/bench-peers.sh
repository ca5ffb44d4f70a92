#!/usr/bin/env bash
# Warden against its peers, in one run: builds the peers bench crate (benches/peers, its own
# workspace and target dir) in release, sets up Invariant's virtualenv (benches/peers/.venv),
# runs the peers criterion benches, the 1 000-rule compile bench and the scaling bench of the
# main crate, Invariant's script, and writes benches/RESULTS.md.
#
# Usage: bash scripts/bench-peers.sh        (about 15–25 minutes on 2 shared cores)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PEERS="$ROOT/benches/peers"
OUT="$PEERS/target/bench-peers"
mkdir -p "$OUT"
t0=$(date +%s)

echo "== build (release): peers crate, main crate's benches"
(cd "$PEERS" && cargo build --release --benches --bins)
(cd "$ROOT" && cargo build --release --bench compile --bench scaling)
t_build=$(( $(date +%s) - t0 ))

echo "== Invariant's virtualenv"
rm -f "$OUT/invariant.err" "$OUT/invariant.json"
if [ ! -x "$PEERS/.venv/bin/python" ]; then
  python3 -m venv "$PEERS/.venv" || echo "python3 -m venv failed" > "$OUT/invariant.err"
fi
if [ ! -e "$OUT/invariant.err" ]; then
  "$PEERS/.venv/bin/pip" install -q 'invariant-ai==0.3.5' \
    || echo "pip install invariant-ai==0.3.5 failed (see the run's log)" > "$OUT/invariant.err"
fi

# One run: results of earlier runs must not leak into the table.
rm -rf "$PEERS/target/criterion/taint_window" "$PEERS/target/criterion/twenty_rules" \
       "$PEERS/target/criterion/handle" "$ROOT/target/criterion/compile"

echo "== peers (criterion)"
(cd "$PEERS" && cargo bench --bench peers) 2>&1 | tee "$OUT/peers.log"

echo "== compile: 1 000 rules"
(cd "$ROOT" && cargo bench --bench compile) 2>&1 | tee "$OUT/compile.log"

echo "== scaling: memory and replay"
(cd "$ROOT" && cargo bench --bench scaling) 2>&1 | tee "$OUT/scaling.log"

echo "== Invariant"
if [ ! -e "$OUT/invariant.err" ]; then
  "$PEERS/target/release/dump_histories" "$OUT/histories"
  # The local analyzer only: no API key, no network.
  env -u INVARIANT_API_KEY LOCAL_POLICY=1 INVARIANT_MAX_ITERATIONS=1000000000 "$PEERS/.venv/bin/python" "$PEERS/invariant_bench.py" \
    "$OUT/histories" "$OUT/invariant.json" 2>&1 | tee "$OUT/invariant.log" \
    || echo "the Invariant script failed: $(tail -1 "$OUT/invariant.log")" > "$OUT/invariant.err"
fi

t_run=$(( $(date +%s) - t0 ))
# Sections measured by other commands (serve load, Rego, effects) are kept as they are: from
# the first of them to the end of the file, so they must stay the last sections.
keep=$(awk '/^## (serve load|Rego|effects)/{f=1} f' "$ROOT/benches/RESULTS.md" 2>/dev/null || true)
python3 "$PEERS/results.py" --peers "$PEERS/target/criterion" --main "$ROOT/target/criterion" \
  --scaling "$OUT/scaling.log" --invariant "$OUT/invariant.json" \
  --build-seconds "$t_build" --run-seconds "$t_run" > "$OUT/RESULTS.md"
{ cat "$OUT/RESULTS.md"; if [ -n "$keep" ]; then printf '\n%s\n' "$keep"; fi; } > "$ROOT/benches/RESULTS.md"
echo "== wrote benches/RESULTS.md (build ${t_build} s, run ${t_run} s)"
