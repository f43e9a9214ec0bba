#!/usr/bin/env bash
# Start or stop the services the test suite uses: a single-node Slurm cluster and headless
# Chromium (when root and apt are available) and an MLflow tracking server on loopback, whose
# backend store is a PostgreSQL server (scripts/postgres.sh) as on a cluster, or SQLite where PostgreSQL cannot be had
# (SCALING_SERVICES_BACKEND=sqlite forces it; a laptop without root and apt falls back to it).
#   eval "$(bash scripts/services.sh start DIR)"   # prints the exports the tests read
#   bash scripts/services.sh stop DIR
set -euo pipefail
cd "$(dirname "$0")/.."
action=${1:?usage: services.sh start|stop DIR}
dir=$(mkdir -p "${2:?usage: services.sh start|stop DIR}" && cd "$2" && pwd)
# as root PostgreSQL runs as `postgres`, which must reach DIR/postgres (mktemp -d makes 0700)
[ "$1" = start ] && chmod o+x "$dir"

start_mlflow() {
  local port backend=$1
  port=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  mkdir -p "$dir/mlflow"
  # without MLflow's job runner (seven huey consumers, for GenAI jobs the project never runs)
  MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false setsid .venv/bin/mlflow server --host 127.0.0.1 --port "$port" --workers 1 \
    --backend-store-uri "$backend" \
    --artifacts-destination "$dir/mlflow/artifacts" >"$dir/mlflow/server.log" 2>&1 &
  echo $! >"$dir/mlflow/pid"
  for _ in $(seq 120); do
    kill -0 "$(cat "$dir/mlflow/pid")" 2>/dev/null || break  # it died: say so now
    if curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
      echo "export SCALING_TEST_MLFLOW_URI=http://127.0.0.1:$port"
      return 0
    fi
    sleep 1
  done
  echo "mlflow server did not come up; see $dir/mlflow/server.log" >&2
  return 1
}

have_postgres() {
  ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1 || { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }
}

case "$action" in
  start)
    backend="sqlite:///$dir/mlflow/mlflow.db"
    if [ "${SCALING_SERVICES_BACKEND:-postgresql}" = postgresql ] && have_postgres; then
      pg_env=$(bash scripts/postgres.sh start "$dir/postgres")
      echo "$pg_env"
      eval "$pg_env"
      backend=$SCALING_TEST_PG_DSN
      echo "export SCALING_TEST_MLFLOW_BACKEND=postgresql"
    elif [ "${SCALING_REQUIRE_SERVICES:-0}" = 1 ]; then
      echo "SCALING_REQUIRE_SERVICES=1 but PostgreSQL cannot be started here" >&2
      exit 1
    else
      echo "no PostgreSQL here: the MLflow server uses SQLite" >&2
      echo "export SCALING_TEST_MLFLOW_BACKEND=sqlite"
    fi
    start_mlflow "$backend"
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      bash .ci/slurm/install.sh >&2
      bash .ci/slurm/start.sh "$dir/slurm"
      # headless Chromium renders report.html in tests/analysis/report/test_report_browser.py
      if ! command -v chromium >/dev/null; then
        apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 \
          || { apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium >/dev/null; }
      fi
    else
      echo "not root or no apt-get: Slurm and Chromium are not installed; their tests will skip" >&2
    fi
    ;;
  stop)
    if [ -f "$dir/mlflow/pid" ]; then
      kill -- -"$(cat "$dir/mlflow/pid")" 2>/dev/null || kill "$(cat "$dir/mlflow/pid")" 2>/dev/null || true
      rm -f "$dir/mlflow/pid"
    fi
    [ -d "$dir/slurm" ] && bash .ci/slurm/stop.sh "$dir/slurm" || true
    [ -d "$dir/postgres" ] && bash scripts/postgres.sh stop "$dir/postgres" || true
    ;;
  *) echo "usage: services.sh start|stop DIR" >&2; exit 2 ;;
esac
