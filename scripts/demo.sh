#!/usr/bin/env bash
# The README's first command: set up .venv/ and run the demo study end to end on this machine
# (offline stdlib corpus → grid of small GPTs → MLflow → scaling fits → verdict and report).
# Extra args go to `scaling run` (e.g. another study file first: scripts/demo.sh studies/x.yaml).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
study=studies/demo.yaml
if [ $# -gt 0 ] && [[ "$1" != -* ]]; then study=$1; shift; fi
exec .venv/bin/scaling run "$study" "$@"
