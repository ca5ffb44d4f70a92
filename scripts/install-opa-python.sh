#!/usr/bin/env bash
# Installs a real OPA for scripts/record-rego-corpus.py: the PyPI package
# opa-golib-python-bindings, which embeds OPA (v1.20.2 in 0.4.4) as a Go shared library, in a
# virtualenv. Its wheel declares Requires-Python >=3.14 but runs on older Pythons, hence
# --ignore-requires-python. Idempotent: a second run with the same version does nothing. The
# folder is WARDEN_OPA_DEPS, by default ~/.cache/warden-opa; the virtualenv is its `venv`.
# No fallback: if the install fails, this script fails.
set -euo pipefail
dir="${WARDEN_OPA_DEPS:-$HOME/.cache/warden-opa}"
version=0.4.4
stamp="$dir/installed-$version"
if [ -f "$stamp" ] && "$dir/venv/bin/python" -c 'import opa_bindings.engine' 2>/dev/null; then
  echo "OPA (opa-golib-python-bindings $version) already in $dir"
  exit 0
fi
rm -rf "$dir/venv"
mkdir -p "$dir"
python3 -m venv "$dir/venv"
"$dir/venv/bin/pip" install --quiet --disable-pip-version-check --ignore-requires-python \
  "opa-golib-python-bindings==$version"
"$dir/venv/bin/python" -c 'from opa_bindings.engine import OpaEngine; OpaEngine().close()'
touch "$stamp"
echo "OPA (opa-golib-python-bindings $version) installed in $dir"
