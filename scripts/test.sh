#!/usr/bin/env bash
# The README's test command: set up .venv/, start the services the tests need (unless the caller
# already did, as .ci/run does), lint, and run the whole suite. Extra args go to pytest.
#
# `--quick` (first argument): the quick tier instead, for the edit-test loop: the unit tests of
# every package and one tiny end-to-end run, in about 3 minutes on 2 cores, with no Slurm and no
# services started (the one run's MLflow server is the `mlflow_server` fixture's own). It is
# the modules listed below, less their `slow`, `slurm` and `gpu` tests (docs/testing.md, "The
# quick tier"). `.ci/run` always runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
if [ "${1:-}" = "--quick" ]; then
  quick=1
  shift
fi
# Each package's unit tests: no job, no study, no subprocess per test; the module's slow tests
# are left out by the mark. Measured and kept under the tier's 3 minutes (docs/testing.md).
QUICK_TESTS=(
  tests/test_imports.py tests/test_layout.py tests/test_one_default.py tests/test_ports.py
  tests/test_interfaces_doc.py
  tests/foundation/test_atomic_refuses_links.py tests/foundation/test_run_status.py
  tests/foundation/test_rest_reader_faults.py
  tests/data_prep/test_cache_lock.py
  tests/models/test_bad_input.py tests/models/test_flops_declared.py
  tests/jobs/test_config.py tests/jobs/test_faults.py tests/jobs/checkpoints/test_checkpoint.py
  tests/jobs/engines/test_optim.py tests/jobs/engines/test_engine_registry.py
  tests/jobs/loop/test_spikes.py
  tests/analysis/report/test_headline.py tests/analysis/tables/test_table.py
  tests/analysis/stats/rules/test_rule.py tests/analysis/stats/lr/test_lr_law.py
  tests/analysis/stats/fits/test_fit.py
  tests/scaling/spec/bad_input/test_bad_specs.py tests/scaling/state/test_state_file_fifo.py
  tests/scaling/lr_search/test_refine.py tests/scaling/lr_search/test_find_edge.py
  # the one end-to-end run: a tiny cell trains and its MLflow record follows the contract
  tests/jobs/loop/test_train.py::test_single_process_run_follows_the_mlflow_contract
)

bash scripts/setup_env.sh

if [ "$quick" = 0 ] && [ -z "${SCALING_TEST_MLFLOW_URI:-}" ]; then
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
selection=()
if [ "$quick" = 1 ]; then selection=(-m "not slow and not slurm and not gpu" "${QUICK_TESTS[@]}"); fi
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} .venv/bin/python -m pytest "${dist[@]}" "${selection[@]}" "$@"
