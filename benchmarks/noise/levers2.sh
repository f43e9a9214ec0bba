#!/usr/bin/env bash
# Second round of levers, at each arm's tuned LR of the demo recipe (warmup 150): does a fixed
# data order, AdamW beta2 0.95, QK-norm or an LR floor of 0 bring the seed sd to <= 0.3%?
# Output: benchmarks/noise/levers2.jsonl (docs/noise.md, "Levers at the tuned LR").
#
#   bash benchmarks/noise/levers2.sh && python benchmarks/noise/summarize.py $OUT
source "$(dirname "$0")/env.sh" noise-levers2
S="$PY benchmarks/noise/sweep.py --out $OUT --data $DATA --steps 600 --warmup 150 \
  --batch-tokens 1024 --seq 64 --position rope --val-windows 512 --seeds 0 1 2"
# the data order fixed (init seed varies), every arm at its tuned LR
for shape_lr in "2,48,3 1.2e-2" "2,32,2 2.4e-2" "2,64,4 1.2e-2" "1,32,2 2.4e-2"; do
  set -- $shape_lr
  $S --tag demo-fixed-wu150 --fixed-order --shape "$1" --lrs "$2"
done
$S --tag fixed-qknorm --fixed-order --qk-norm --shape 2,48,3 --lrs 1.2e-2 2.4e-2
$S --tag fixed-b95 --fixed-order --beta2 0.95 --shape 2,48,3 --lrs 1.2e-2 --variants linear
# beta2 0.95 with the study's own data order (data seed + seed)
for shape_lr in "2,48,3 1.2e-2" "1,32,2 2.4e-2" "2,32,2 2.4e-2" "2,64,4 1.2e-2"; do
  set -- $shape_lr
  $S --tag b95-wu150 --beta2 0.95 --shape "$1" --lrs "$2"
done
$S --tag b95-floor0 --beta2 0.95 --min-lr-ratio 0 --variants linear --shape 2,32,2 --lrs 2.4e-2
$S --tag b95-floor0 --beta2 0.95 --min-lr-ratio 0 --variants linear --shape 1,32,2 --lrs 2.4e-2
$S --tag b95-wu150 --beta2 0.95 --variants linear --shape 2,32,2 --lrs 1.2e-2
