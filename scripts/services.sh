#!/usr/bin/env bash
# Start or stop the services the test suite uses: a single-node Slurm cluster (when root and apt
# are available) and an MLflow tracking server on loopback.
#   eval "$(bash scripts/services.sh start DIR)"   # prints the exports the tests read
#   bash scripts/services.sh stop DIR
set -euo pipefail
cd "$(dirname "$0")/.."
action=${1:?usage: services.sh start|stop DIR}
dir=$(mkdir -p "${2:?usage: services.sh start|stop DIR}" && cd "$2" && pwd)

start_mlflow() {
  local port
  port=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  mkdir -p "$dir/mlflow"
  setsid .venv/bin/mlflow server --host 127.0.0.1 --port "$port" --workers 1 \
    --backend-store-uri "sqlite:///$dir/mlflow/mlflow.db" \
    --artifacts-destination "$dir/mlflow/artifacts" >"$dir/mlflow/server.log" 2>&1 &
  echo $! >"$dir/mlflow/pid"
  for _ in $(seq 120); do
    if curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1; then
      echo "export SCALING_TEST_MLFLOW_URI=http://127.0.0.1:$port"
      return 0
    fi
    sleep 1
  done
  echo "mlflow server did not come up; see $dir/mlflow/server.log" >&2
  return 1
}

case "$action" in
  start)
    start_mlflow
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      bash .ci/slurm/install.sh >&2
      bash .ci/slurm/start.sh "$dir/slurm"
    else
      echo "not root or no apt-get: Slurm is not started and the Slurm tests will skip" >&2
    fi
    ;;
  stop)
    if [ -f "$dir/mlflow/pid" ]; then
      kill -- -"$(cat "$dir/mlflow/pid")" 2>/dev/null || kill "$(cat "$dir/mlflow/pid")" 2>/dev/null || true
      rm -f "$dir/mlflow/pid"
    fi
    [ -d "$dir/slurm" ] && bash .ci/slurm/stop.sh "$dir/slurm" || true
    ;;
  *) echo "usage: services.sh start|stop DIR" >&2; exit 2 ;;
esac
