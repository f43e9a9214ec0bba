#!/usr/bin/env bash
# Third round (docs/noise.md, "Twice the batch, more seeds, and the start-up cost"): twice the
# steps at half the batch (the same tokens), at the tuned LR and the next one up, 4 seeds, on
# the two cells with the largest sd. Output: benchmarks/noise/levers3.jsonl. The 2x-batch and
# 4/6-seed rows come from whole `scaling run`s of studies/demo.yaml variants, turned into lines
# by from_study.py (demo2048.jsonl, demo4.jsonl, demo6.jsonl).
#
#   bash benchmarks/noise/levers3.sh && python benchmarks/noise/summarize.py $OUT
source "$(dirname "$0")/env.sh" noise-levers3
S="$PY benchmarks/noise/sweep.py --out $OUT --data $DATA --seq 64 --position rope \
  --val-windows 512 --steps 1200 --warmup 300 --batch-tokens 512 --seeds 0 1 2 3"
$S --tag b512-1200 --shape 2,48,3 --variants linear --lrs 1.2e-2 2.4e-2
$S --tag b512-1200 --shape 2,32,2 --variants nonlinear --lrs 1.2e-2 2.4e-2
