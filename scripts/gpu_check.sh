#!/usr/bin/env bash
# The first GPU hour in one prepared command (benchmarks/gpu_check.py says what it runs):
#   bash scripts/gpu_check.sh [--out DIR]     # on a machine with one CUDA GPU, within 8 minutes
#   bash scripts/gpu_check.sh --tiny          # the same parts on a CPU (CI runs this)
# On a machine without the project's .venv (a lent GPU box: its own python3 holds torch), wheels
# carried in .whl/ (scripts/gpu_wheels.sh) are installed to /tmp/site first.
set -uo pipefail
cd "$(dirname "$0")/.."
python=.venv/bin/python
if [ ! -x "$python" ]; then
  python=python3
  if compgen -G ".whl/*.whl" >/dev/null; then
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
exec "$python" benchmarks/gpu_check.py "$@"
