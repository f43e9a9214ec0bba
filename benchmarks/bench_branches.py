"""WSD cooldown branches vs independent runs: the same 4-budget CPU mini-study both ways.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_branches.py [--steps 640]

One size, one arm, one seed; budgets 1/8, 1/4, 1/2 and 1 of `--steps` steps, cooldown 20%.
Branched: the study's stable cell (constant LR to the last branch point, kept checkpoints),
then each branch from its checkpoint. Independent: each branch's own run config trained from
scratch (no `init_from`): the WSD run to that budget. Both arms train in this process, tracking
off, one after the other. Prints the wall-time and FLOPs ratios (branched / independent; the
plan's FLOPs, and the steps actually trained) and, per budget, the difference in final
validation loss (0 when the branch is bitwise the independent run).

Measured 2026-11-30 on the shared 2-core box (other engineers' jobs running), 2 layers, d 64:

    --steps 640 (budgets 80/160/320/640): wall 53.4 s vs 66.9 s (0.798), training loop 0.734,
        FLOPs 0.627 (752 vs 1200 steps), max |final val loss difference| 0 (bitwise)
    --steps 160 (run_all): wall 11.8 s vs 15.9 s (0.745), loop 0.692, FLOPs 0.627, max diff 0

The wall ratio sits above the FLOPs ratio: every run pays its own set-up (model, dataset,
process group), the stable run writes four kept checkpoints, and the box is shared.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo

from foundation import contract as C  # noqa: E402

STEP_TOKENS = 512  # 8 sequences x 64 tokens


def _spec(data_dir: Path, out: Path, steps: int) -> dict:
    return {
        "name": "bench-branches",
        "output_dir": str(out / "study"),
        "mlflow": {"experiment": "bench-branches", "tracking_uri": f"sqlite:///{out}/m.db"},
        "data": {"path": str(data_dir), "num_val_windows": 16},
        "sizes": ["100K"],
        "variants": ["linear"],
        "seeds": [0],
        "model": {"seq_length": 64},
        "ladder": {
            "shapes": {"100K": {"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4}}
        },
        "tokens": {
            "tokens_per_param": None,
            "per_size": {"100K": steps * STEP_TOKENS},
            "branches": [0.125, 0.25, 0.5, 1.0],
            "cooldown": 0.2,
        },
        "batch": {"rule": "fixed", "tokens": STEP_TOKENS, "micro_batch_size": 8},
        "lr": {"law": "none", "grid": {"*": {"100K": [3e-3]}}},
        "schedule": {"kind": "wsd", "warmup_steps": 10},
        "train": {"log_interval": 1000},
        "precision": "fp32",
    }


def _untracked(run, output_dir: Path, init_from=None):
    tracking = dataclasses.replace(run.tracking, enabled=False)
    return dataclasses.replace(
        run, tracking=tracking, output_dir=str(output_dir), init_from=init_from
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=640, help="the largest budget, in steps")
    args = parser.parse_args()

    from data_prep.testing import tiny_dataset
    from jobs.loop.trainer import train
    from scaling.costs.plan import branch_saving
    from scaling.spec.loader import resolve, study_from_dict

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        data_dir = tiny_dataset(out / "data")
        study = resolve(study_from_dict(_spec(data_dir, out, args.steps)))
        stable = next(c for c in study.cells if c.kind == C.KIND_STABLE)
        branches = [c for c in study.cells if c.kind == C.KIND_BRANCH]

        # untimed warm-up: the dataset's index cache and first-call costs go to neither arm
        train(_untracked(branches[0].run, out / "warmup"))

        start = time.perf_counter()
        stable_dir = out / "branched" / stable.cell_id
        stable_result = train(_untracked(stable.run, stable_dir))
        branched = {}
        for cell in branches:
            init = dataclasses.replace(cell.run.init_from, output_dir=str(stable_dir))
            branched[cell.cell_id] = train(
                _untracked(cell.run, out / "branched" / cell.cell_id, init)
            )
        branched_s = time.perf_counter() - start

        start = time.perf_counter()
        independent = {
            c.cell_id: train(_untracked(c.run, out / "independent" / c.cell_id)) for c in branches
        }
        independent_s = time.perf_counter() - start

    saving = branch_saving(study)
    trained_branched = stable.run.train.steps + sum(
        c.run.train.steps - c.run.init_from.step for c in branches
    )
    trained_independent = sum(c.run.train.steps for c in branches)
    print(f"budgets (steps of {STEP_TOKENS} tokens): {[c.run.train.steps for c in branches]}")
    loop_branched = stable_result.loop_time_s + sum(r.loop_time_s for r in branched.values())
    loop_independent = sum(r.loop_time_s for r in independent.values())
    print(
        f"wall time: branched {branched_s:.1f} s, independent {independent_s:.1f} s, "
        f"ratio {branched_s / independent_s:.3f} (each run also pays ~1-2 s of set-up)"
    )
    print(
        f"training-loop time: branched {loop_branched:.1f} s, independent "
        f"{loop_independent:.1f} s, ratio {loop_branched / loop_independent:.3f}"
    )
    print(
        f"FLOPs (plan): branched {saving.flops:.3g}, independent {saving.independent_flops:.3g}, "
        f"ratio {saving.flops / saving.independent_flops:.3f}; steps trained "
        f"{trained_branched} vs {trained_independent} "
        f"(ratio {trained_branched / trained_independent:.3f})"
    )
    worst = 0.0
    for cell in branches:
        a, b = branched[cell.cell_id], independent[cell.cell_id]
        diff = abs(a.final_val_loss - b.final_val_loss)
        worst = max(worst, diff)
        same = a.train_losses == b.train_losses
        print(
            f"  D={cell.run.train.steps * STEP_TOKENS:>7}: final val loss branched "
            f"{a.final_val_loss:.6f} independent {b.final_val_loss:.6f} |diff| {diff:.3g} "
            f"(train-loss history bitwise equal: {same})"
        )
    print(f"max |final loss difference| over budgets: {worst:.3g}")


if __name__ == "__main__":
    main()
