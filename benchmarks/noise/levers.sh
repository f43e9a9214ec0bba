#!/usr/bin/env bash
# The lever measurements of docs/noise.md: each line trains 3 seeds of one recipe (linear arm)
# and appends them to $OUT. Two lines at a time on 2 cores (one thread each):
#
#   bash benchmarks/noise/levers.sh            # ~25 min of CPU on 2 cores; then
#   python benchmarks/noise/summarize.py $OUT  # the tables
#
# Data: the demo's corpus (8 MB of stdlib source), byte level (BPE vocab 257 = the 256 bytes
# plus end-of-document, i.e. no merges) and BPE 2048 (the old demo's).
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1 PYTHONWARNINGS=ignore
PY=${PY:-.venv/bin/python}
DATA=${DATA:-/tmp/noise-data}
OUT=${OUT:-/tmp/noise-results.jsonl}

for vocab in 257 2048; do
  $PY -m scaling prepare-data --source stdlib -o "$DATA/v$vocab" --tokenizer bpe \
    --vocab-size "$vocab" --max-bytes 8000000 --validation-fraction 0.05
done
$PY -m scaling prepare-data --source stdlib -o "$DATA/v257-1.4M" --tokenizer bpe \
  --vocab-size 257 --max-bytes 1400000 --validation-fraction 0.5

S="$PY benchmarks/noise/sweep.py --out $OUT --variants linear --seeds 0 1 2 --lrs 3e-3"
B="$S --data $DATA/v257"
# The starting point: byte level, 300 steps x 16 x 128 tokens, learned positions
$B --tag byte-300 --shape 2,32,2 --steps 300 --warmup 30 &
$B --tag byte-300 --shape 2,64,4 --steps 300 --warmup 30; wait
$B --tag byte-300 --shape 3,96,6 --steps 300 --warmup 30 &
# Init seed against data order
$B --tag byte-300-fixedorder --shape 2,32,2 --steps 300 --warmup 30 --fixed-order; wait
$B --tag byte-300-fixedinit --shape 2,32,2 --steps 300 --warmup 30 --fixed-init &
# Peak LR, LR floor, validation tokens, corpus size, tokenizer
$S --data "$DATA/v257" --lrs 1e-2 --tag byte-300-lr1e-2 --shape 2,32,2 --steps 300 --warmup 30
wait
$B --tag byte-300-min0 --shape 2,32,2 --steps 300 --warmup 30 --min-lr-ratio 0.0 &
$B --tag byte-300-val1024 --shape 2,32,2 --steps 300 --warmup 30 --val-windows 1024; wait
$S --data "$DATA/v257-1.4M" --tag byte1.4Mv0.5-300 --shape 2,32,2 --steps 300 --warmup 30 &
$S --data "$DATA/v2048" --tag bpe2048-300 --shape 2,32,2 --steps 300 --warmup 30; wait
# Steps against batch size, at the same 614K tokens
$B --tag byte-600 --shape 2,32,2 --steps 600 --warmup 60 --batch-tokens 2048 &
$B --tag byte-b4096-150 --shape 2,32,2 --steps 150 --warmup 15 --batch-tokens 4096 --seeds 0
wait
# Positions: RoPE; then shorter windows and smaller batches with RoPE
$B --tag byte-300-rope --shape 2,32,2 --steps 300 --warmup 30 --position rope &
$B --tag rope-seq64 --shape 2,32,2 --steps 300 --warmup 30 --position rope --seq 64; wait
$B --tag rope-b1024-600 --shape 2,32,2 --steps 600 --warmup 60 --batch-tokens 1024 \
  --position rope &
$B --tag rope-s64-b1024-600 --shape 2,32,2 --steps 600 --warmup 60 --batch-tokens 1024 \
  --seq 64 --position rope; wait
