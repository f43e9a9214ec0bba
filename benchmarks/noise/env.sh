# Sourced by the noise scripts: the repository root, one thread per cell, the demo's byte-level
# corpus in $DATA (prepared on first use), and $OUT for the JSON lines ($1: its default name).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export OMP_NUM_THREADS=1 PYTHONWARNINGS=ignore
PY=${PY:-.venv/bin/python}
DATA=${DATA:-/tmp/noise-data/v257}
OUT=${OUT:-/tmp/$1.jsonl}
[ -f "$DATA/manifest.json" ] || $PY -m scaling prepare-data --source stdlib -o "$DATA" \
  --tokenizer bpe --vocab-size 257 --max-bytes 8000000 --validation-fraction 0.05
