#!/usr/bin/env bash
# Installs what tests/mcp_proxy.rs drives `warden mcp-proxy` with: the reference MCP filesystem
# server (npm) and the Python MCP client library (PyPI, in a virtualenv). Idempotent: a second
# run with the same versions does nothing. The folder is WARDEN_MCP_DEPS, by default
# ~/.cache/warden-mcp-test; the test looks there too.
set -euo pipefail
dir="${WARDEN_MCP_DEPS:-$HOME/.cache/warden-mcp-test}"
server_version=2026.8.31
client_version=2.3.0
stamp="$dir/installed-$server_version-$client_version"
if [ -f "$stamp" ]; then
  echo "MCP test dependencies already in $dir"
  exit 0
fi
mkdir -p "$dir/node"
(
  cd "$dir/node"
  [ -f package.json ] || echo '{"private": true}' > package.json
  npm install --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/server-filesystem@$server_version"
)
python3 -m venv "$dir/venv"
"$dir/venv/bin/pip" install --quiet --disable-pip-version-check "mcp==$client_version"
touch "$stamp"
echo "MCP test dependencies installed in $dir"
