#!/usr/bin/env bash
# Create (once) and update (when pyproject.toml changes) the project's environment in .venv/.
# Usage: source-free; prints nothing but pip's errors. Needs only Python 3.11 and pip.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=python3
"$PYTHON" - <<'PY' || { echo "Python 3.11 is required (found $("$PYTHON" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)
PY

if [ ! -x .venv/bin/python ]; then
  echo "Creating .venv/ ..." >&2
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ]; then
  echo "Installing the pinned dependencies into .venv/ (first time: a few minutes) ..." >&2
  .venv/bin/python -m pip install -q --upgrade pip
  # torch first and alone, by exact version, so that nothing pulls a multi-GB CUDA build.
  torch_pin=$(grep -oE '"torch==[^"]+"' pyproject.toml | tr -d '"')
  .venv/bin/python -m pip install -q "$torch_pin"
  .venv/bin/python -m pip install -q -e '.[dev]'
  rm -f .venv/.installed-*
  touch "$stamp"
fi
