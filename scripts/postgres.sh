#!/usr/bin/env bash
# A throwaway PostgreSQL server on loopback for the MLflow backend store (CI, fault tests).
#   bash scripts/postgres.sh start DIR [PORT]   # prints `export SCALING_TEST_PG_DSN=...`
#   bash scripts/postgres.sh restart DIR        # pg_ctl restart (fast): drops every connection
#   bash scripts/postgres.sh stop DIR
# Debian's `postgresql` package (installed here when root and apt are available); the cluster
# lives entirely in DIR (data, socket, log), listens on 127.0.0.1 only and trusts local
# connections, so it needs no password and touches no system cluster. initdb refuses to run as
# root, so as root everything runs as the `postgres` user the package creates.
set -euo pipefail
action=${1:?usage: postgres.sh start|restart|stop DIR [PORT]}
dir=$(mkdir -p "${2:?usage: postgres.sh start|restart|stop DIR [PORT]}" && cd "$2" && pwd)
data="$dir/data"

find_bin() {
  local bin
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)
  if [ -z "$bin" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing Debian's postgresql ..." >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
    bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)
  fi
  [ -n "$bin" ] || { echo "postgres.sh: no PostgreSQL in /usr/lib/postgresql (apt-get install postgresql)" >&2; exit 1; }
  echo "$bin"
}

as_owner() {  # run a PostgreSQL binary as the data dir's owner
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

bin=$(find_bin)
case "$action" in
  start)
    port=${3:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')}
    if [ ! -f "$data/PG_VERSION" ]; then
      mkdir -p "$data"
      if [ "$(id -u)" = 0 ]; then
        chown -R postgres:postgres "$dir"
        runuser -u postgres -- test -x "$dir" || {
          echo "postgres.sh: the postgres user cannot reach $dir; make its parent folders" \
            "traversable (chmod o+x), or choose a folder under one that is" >&2
          exit 1
        }
      fi
      as_owner "$bin/initdb" -D "$data" -U postgres --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1
    fi
    # many cells each hold a few connections through the MLflow server's pool
    as_owner "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 \
      -o "-h 127.0.0.1 -p $port -k $dir -c max_connections=200" start >&2
    echo "$port" >"$dir/port"
    as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres mlflow 2>/dev/null || true
    # +psycopg2: SQLAlchemy 2.1 otherwise picks psycopg 3, which is not installed
    echo "export SCALING_TEST_PG_DSN=postgresql+psycopg2://postgres@127.0.0.1:$port/mlflow"
    echo "export SCALING_TEST_PG_DIR=$dir"
    ;;
  restart)
    as_owner "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -m fast -w -t 60 restart >&2
    ;;
  stop)
    [ -f "$data/postmaster.pid" ] && as_owner "$bin/pg_ctl" -D "$data" -m fast -w stop >&2 || true
    ;;
  *) echo "usage: postgres.sh start|restart|stop DIR [PORT]" >&2; exit 2 ;;
esac
