#!/usr/bin/env bash
# The Python package (python/, docs/python.md), end to end: lints the binding crate, builds
# the wheel with maturin, installs it into a fresh virtualenv and runs python/tests with
# unittest against the installed package. Run by .ci/run; needs python3 (with venv), cargo and
# PyPI for maturin (pinned, installed once into WARDEN_PYTHON_TOOLS, by default
# ~/.cache/warden-python-test). The wheel is a debug build (the test is about the binding, and
# a release build of the evaluator takes minutes); `maturin build --release` makes the one to
# ship. Builds go to $CARGO_TARGET_DIR, by default the root's target/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
maturin_version=1.16.0
tools="${WARDEN_PYTHON_TOOLS:-$HOME/.cache/warden-python-test}"

if [ "$("$tools/venv/bin/maturin" --version 2>/dev/null)" != "maturin $maturin_version" ]; then
  rm -rf "$tools/venv"
  mkdir -p "$tools"
  python3 -m venv "$tools/venv"
  "$tools/venv/bin/pip" install --quiet --disable-pip-version-check "maturin==$maturin_version"
fi

cd "$root/python"
# Its own workspace: the root's `cargo fmt` and `cargo clippy` do not reach it. Its Cargo.lock
# is not --locked: the root crate's dependencies change under it, and cargo adds what is new
# while keeping the rest pinned.
echo "-- fmt and clippy (python/)"
cargo fmt --check
cargo clippy --all-targets -- -D warnings

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "-- maturin build"
"$tools/venv/bin/maturin" build --quiet --interpreter python3 --out "$work/wheels"
wheel=$(ls "$work"/wheels/warden-*.whl)
echo "built $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"

echo "-- a fresh virtualenv, the wheel installed, the tests"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check --no-index "$wheel"
# From the tests' folder, so that `import warden` is the installed package, not python/warden.
cd "$root/python/tests"
"$work/venv/bin/python" -m unittest -v test_warden
