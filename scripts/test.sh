#!/usr/bin/env bash
# The README's test command: set up .venv/, start the services the tests need (unless the caller
# already did, as .ci/run does), lint, and run the whole suite. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh

if [ -z "${SCALING_TEST_MLFLOW_URI:-}" ]; then
  services_dir=$(mktemp -d /tmp/scaling-services.XXXXXX)
  trap 'bash scripts/services.sh stop "$services_dir"' EXIT
  bash scripts/services.sh start "$services_dir" >"$services_dir/env"
  source "$services_dir/env"
fi

.venv/bin/ruff check .
.venv/bin/ruff format --check .
# Two workers (CI's 2 cores; SCALING_TEST_WORKERS=0 runs in one process): much of the suite waits
# on jobs, servers and Slurm, so two overlap; each module stays on one worker and Slurm's tests
# run one after another, the longest groups first (tests/conftest.py).
workers=${SCALING_TEST_WORKERS:-2}
dist=()
if [ "$workers" != 0 ]; then dist=(-n "$workers" --dist loadgroup --no-loadscope-reorder); fi
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} .venv/bin/python -m pytest "${dist[@]}" "$@"
