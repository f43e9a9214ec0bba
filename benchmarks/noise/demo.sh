#!/usr/bin/env bash
# The proposed demo recipe, as the two-stage scan it is meant to run (docs/noise.md):
#   stage 1: seed 0 at 3 LRs for every (variant, size)  -> the LR winner of each arm
#   stage 2: seeds 1 and 2 at that arm's winner         -> 3 seeds at each arm's own tuned LR
# Cells go through jobs.train (benchmarks/noise/sweep.py), two processes at a time.
#
#   bash benchmarks/noise/demo.sh && python benchmarks/noise/summarize.py $OUT
source "$(dirname "$0")/env.sh" noise-demo

# studies/demo.yaml's recipe: bytes, RoPE, 600 steps x 16 x 64 tokens, warmup 60, cosine to 0.1
S="$PY benchmarks/noise/sweep.py --out $OUT --data $DATA --tag demo --steps 600 --warmup 60 \
  --batch-tokens 1024 --seq 64 --position rope --val-windows 512"
SHAPES_A="1,32,2 2,64,4"  # 12K and 100K in one process, 25K and 55K in the other
SHAPES_B="2,32,2 2,48,3"

# Stage 1: seed 0 at 6e-3, 1.2e-2, 2.4e-2; and 4.8e-2 where 2.4e-2 won (12K, 25K)
for shapes in "$SHAPES_A" "$SHAPES_B"; do
  (for shape in $shapes; do $S --shape "$shape" --seeds 0 --lrs 6e-3 1.2e-2 2.4e-2; done) &
done
wait
$S --shape 1,32,2 --seeds 0 --lrs 4.8e-2 &
$S --shape 2,32,2 --seeds 0 --lrs 4.8e-2; wait

# Stage 2: seeds 1 and 2 at the seed-0 winner of each (shape, variant)
winner() {  # shape variant -> the LR with the lowest seed-0 loss
  $PY - "$OUT" "$1" "$2" <<'EOF'
import json, sys
out, shape, variant = sys.argv[1:]
rows = [json.loads(l) for l in open(out)]
rows = [r for r in rows if r["tag"] == "demo" and r["shape"] == shape
        and r["variant"] == variant and r["seed"] == 0]
print(min(rows, key=lambda r: r["loss"])["lr"])
EOF
}
for shapes in "$SHAPES_A" "$SHAPES_B"; do
  (for shape in $shapes; do
    for variant in linear nonlinear; do
      $S --shape "$shape" --variants "$variant" --seeds 1 2 --lrs "$(winner "$shape" "$variant")"
    done
  done) &
done
wait

# Checks: seeds 0-2 one LR step below the winner at 12K and 25K, and a 150-step warmup
for shape in 1,32,2 2,32,2; do $S --shape "$shape" --seeds 1 2 --lrs 1.2e-2 & done; wait
W="${S/--warmup 60/--warmup 150} --seeds 0 1 2"
$W --tag demo-wu150 --shape 2,32,2 --variants nonlinear --lrs 2.4e-2 &
$W --tag demo-wu150 --shape 2,48,3 --variants linear --lrs 1.2e-2; wait
($W --tag demo-wu150 --shape 2,48,3 --variants nonlinear --lrs 1.2e-2
 $W --tag demo-wu150 --shape 1,32,2 --variants nonlinear --lrs 2.4e-2) &
($W --tag demo-wu150 --shape 2,64,4 --variants nonlinear --lrs 1.2e-2
 $W --tag demo-wu150 --shape 2,32,2 --variants linear --lrs 2.4e-2) &
wait
$W --tag demo-wu150 --shape 2,64,4 --variants linear --lrs 1.2e-2 &
$W --tag demo-wu150 --shape 1,32,2 --variants linear --lrs 2.4e-2; wait
