#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests/serve_postgres.rs, on a free loopback port.
#
#   scripts/postgres-test-setup.sh start DIR   installs PostgreSQL if missing (Debian's package),
#                                              creates a cluster in DIR/data, starts it and
#                                              prints its connection URL (the only stdout line)
#   scripts/postgres-test-setup.sh stop DIR    stops that cluster and deletes DIR
#
# initdb refuses to run as root: as root, the cluster belongs to the `postgres` user the
# Debian package creates (or to a `warden-pg` system user made here) and its commands run
# through runuser. Authentication is `trust`, on 127.0.0.1 and a socket inside DIR only.
set -euo pipefail
cmd="${1:-}"
dir="${2:-}"
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  echo "usage: $0 start|stop DIR" >&2
  exit 2
fi

bindir() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    if [ -x "$d/initdb" ]; then
      echo "$d"
      return 0
    fi
  done
  if command -v initdb >/dev/null 2>&1; then
    dirname "$(command -v initdb)"
    return 0
  fi
  return 1
}

as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u "$owner" -- "$@"
  else
    "$@"
  fi
}

owner=$(id -un)
if [ "$(id -u)" = 0 ]; then
  if id postgres >/dev/null 2>&1; then
    owner=postgres
  else
    id warden-pg >/dev/null 2>&1 || useradd --system --no-create-home warden-pg
    owner=warden-pg
  fi
fi

case "$cmd" in
start)
  if ! bin=$(bindir); then
    echo "installing PostgreSQL (Debian package postgresql)" >&2
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y postgresql >&2
    bin=$(bindir)
  fi
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown "$owner" "$dir"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  as_owner "$bin/initdb" -D "$dir/data" -U warden -A trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir" start >&2 \
    || { cat "$dir/server.log" >&2; exit 1; }
  echo "postgres://warden@127.0.0.1:$port/postgres"
  ;;
stop)
  if [ -d "$dir/data" ] && bin=$(bindir); then
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >&2 || true
  fi
  rm -rf "$dir"
  ;;
*)
  echo "usage: $0 start|stop DIR" >&2
  exit 2
  ;;
esac
