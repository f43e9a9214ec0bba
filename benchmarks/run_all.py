"""Every benchmark in one run, each printing its ratios measured side by side.

    .venv/bin/python benchmarks/run_all.py            # quick settings, ~8 min on 2 CPU cores
    .venv/bin/python benchmarks/run_all.py --full     # each benchmark's default settings

Sections (targets from the issues):
  models      megatron `linear` step time / plain PyTorch GPT (<= 1.10) and
              `nonlinear` / `linear` at d = 512 (<= 1.05)
  jobs        steps/s, and tracked / untracked training-loop time (tracking <= 1%)
  data_prep   prepare-data tokens/s / raw `tokenizers` batch encode (>= 0.7)
  analysis    fits + 1000-resample bootstrap of a 200-run study (<= 30 s)
  branches    a 4-budget WSD-branched mini-study vs independent runs: wall-time and FLOPs
              ratios, max final-loss difference per budget (0: bitwise)
  warmstart   a local cell forked from the warm server / started cold: job wall time and
              time outside the training loop (equal final losses required)
  loss_reduction  per-step cost of the DP loss reduction: a device-side sum with one
              all-reduce against a host sync per micro-batch (today's two variants)
  plan_wall   `scaling plan`'s wall-clock estimate / the measured `scaling run` of the CI-sized
              demo copy (0.75-1.25; `bench_plan_wall.py --full`: the demo itself)
  inference   prefill tok/s, KV-cache decode ms (batch 1, 32), peak memory of every variant,
              and its ratio to `linear`, per size (CPU figures on CPU)
  demo        `scaling run studies/demo.yaml` from nothing: wall time, and each arm's seed sd
              as % of its loss per size (~15 min; only with --full or --only demo)
Each benchmark runs in its own process (one at a time, so they do not disturb each other).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUICK = {
    "models": ["bench_models.py", "--quick"],
    "jobs": ["bench_jobs.py", "--steps", "20", "--repeats", "1"],
    "data_prep": ["bench_data_prep.py", "--max-bytes", "10000000", "--repeat", "2"],
    "analysis": ["bench_analysis.py", "--resamples", "1000"],
    "branches": ["bench_branches.py", "--steps", "160"],
    "warmstart": ["bench_warmstart.py", "--pairs", "2"],
    "loss_reduction": ["bench_loss_reduction.py", "--steps", "40"],
    "pilot": ["bench_pilot.py", "--steps", "10", "--warmup", "2"],
    "plan_wall": ["bench_plan_wall.py"],
    "inference": ["bench_inference.py", "--quick"],
    "demo": ["bench_demo.py"],
}
SLOW = {"demo"}  # run by --full or when named with --only


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full", action="store_true", help="each benchmark's default settings")
    parser.add_argument("--only", nargs="*", choices=list(QUICK), default=None)
    args = parser.parse_args()
    if args.only is None:
        args.only = [n for n in QUICK if args.full or n not in SLOW]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent), env.get("PYTHONPATH")]))
    failed = []
    for name in args.only:
        script, *options = QUICK[name]
        command = [sys.executable, str(HERE / script), *([] if args.full else options)]
        print(f"\n=== {name}: {' '.join(command[1:])}", flush=True)
        start = time.monotonic()
        if subprocess.run(command, env=env, cwd=HERE.parent).returncode != 0:
            failed.append(name)
        print(f"=== {name}: {time.monotonic() - start:.0f} s", flush=True)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
