#!/usr/bin/env bash
# Warden against its peers, in one run: builds the peers bench crate (benches/peers, its own
# workspace and target dir) in release, sets up Invariant's virtualenv (benches/peers/.venv),
# runs the peers criterion benches, the main crate's compile, scaling and decide (its
# `inference` group) benches, Invariant's script, the HTTP load test with the server on one core and
# on two, and writes benches/RESULTS.md.
#
# Usage: bash scripts/bench-peers.sh        (about 30–40 minutes on 2 cores; run it on a quiet
# machine: every figure drops by a third when other work shares the cores)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PEERS="$ROOT/benches/peers"
OUT="$PEERS/target/bench-peers"
mkdir -p "$OUT"
t0=$(date +%s)

echo "== build (release): peers crate, main crate's benches"
(cd "$PEERS" && cargo build --release --benches --bins)
(cd "$ROOT" && cargo build --release --bench compile --bench scaling --bench decide \
  && cargo test --release --test serve_load --no-run)
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
       "$PEERS/target/criterion/handle" "$ROOT/target/criterion/compile" \
       "$ROOT/target/criterion/inference" "$OUT"/serve-*.log

echo "== peers (criterion)"
(cd "$PEERS" && cargo bench --bench peers) 2>&1 | tee "$OUT/peers.log"

echo "== compile: 1 000 rules"
(cd "$ROOT" && cargo bench --bench compile) 2>&1 | tee "$OUT/compile.log"

echo "== scaling: memory and replay"
(cd "$ROOT" && cargo bench --bench scaling) 2>&1 | tee "$OUT/scaling.log"

echo "== decide: the cost of inference per argument"
(cd "$ROOT" && cargo bench --bench decide -- '^inference/') 2>&1 | tee "$OUT/decide.log"

echo "== serve over HTTP: the server on one core, then on two (32 clients, in memory)"
for cpus in 0 0-1; do
  (cd "$ROOT" && WARDEN_SERVE_CPUS=$cpus WARDEN_LOAD_CONNS=32 WARDEN_LOAD_MODES=memory \
    cargo test --release --test serve_load -- --ignored --nocapture) 2>&1 | tee "$OUT/serve-$cpus.log"
done

echo "== Invariant"
if [ ! -e "$OUT/invariant.err" ]; then
  "$PEERS/target/release/dump_histories" "$OUT/histories"
  # The local analyzer only: no API key, no network.
  env -u INVARIANT_API_KEY LOCAL_POLICY=1 INVARIANT_MAX_ITERATIONS=1000000000 "$PEERS/.venv/bin/python" "$PEERS/invariant_bench.py" \
    "$OUT/histories" "$OUT/invariant.json" 2>&1 | tee "$OUT/invariant.log" \
    || echo "the Invariant script failed: $(tail -1 "$OUT/invariant.log")" > "$OUT/invariant.err"
fi

t_run=$(( $(date +%s) - t0 ))
# Sections written by hand (the profiles behind the figures) and those measured by other
# commands (serve load, Rego, effects) are kept as they are: from the first of them to the end
# of the file, so they must stay the last sections.
keep=$(awk '/^## (Profiles|serve load|Rego|effects)/{f=1} f' "$ROOT/benches/RESULTS.md" 2>/dev/null || true)
python3 "$PEERS/results.py" --peers "$PEERS/target/criterion" --main "$ROOT/target/criterion" \
  --scaling "$OUT/scaling.log" --invariant "$OUT/invariant.json" \
  --serve-one "$OUT/serve-0.log" --serve-two "$OUT/serve-0-1.log" \
  --build-seconds "$t_build" --run-seconds "$t_run" > "$OUT/RESULTS.md"
{ cat "$OUT/RESULTS.md"; if [ -n "$keep" ]; then printf '\n%s\n' "$keep"; fi; } > "$ROOT/benches/RESULTS.md"
echo "== wrote benches/RESULTS.md (build ${t_build} s, run ${t_run} s)"
