"""Warm against cold start of local cells: the per-cell time outside the training loop.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_warmstart.py [--pairs 3] [--steps 600]

Runs the same small cell (the demo's 12K shape, 16 x 64 tokens a step, MLflow on a local
SQLite store) as a submitit local job, alternately cold (`python -m submitit.core._submit`, as
before) and forked from a `scaling.warmstart.server` server, `--pairs` times each. Interleaving
keeps the two arms under the same load. For each start it prints the median job wall time (submit
to done), the median training-loop time, the difference (imports, set-up, MLflow, exit) and
the warm/cold ratios. The final losses must match bitwise; the script fails if they do not.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _config(root: Path, data: Path, name: str, steps: int):
    from foundation.config import from_dict
    from jobs.config import RunConfig
    from jobs.testing import tiny_run_dict

    cfg = tiny_run_dict(
        root / name,
        data,
        name=name,
        model={"num_layers": 1, "hidden_size": 32, "num_attention_heads": 2, "seq_length": 64},
        train={
            "steps": steps,
            "global_batch_tokens": 1024,
            "micro_batch_size": 16,
            "log_interval": 20,
            "eval_interval": steps // 2,
        },
        tracking={"enabled": True, "tracking_uri": f"sqlite:///{root}/mlflow.db"},
    )
    return from_dict(RunConfig, cfg, where="run")


def _run(root: Path, data: Path, python: str | None, name: str, steps: int) -> dict:
    import submitit

    from jobs import TrainingJob

    executor = submitit.LocalExecutor(folder=root / "submitit", python=python)
    executor.update_parameters(timeout_min=30)
    start = time.perf_counter()
    job = executor.submit(TrainingJob(_config(root, data, name, steps)))
    while not job.done():
        time.sleep(0.02)
    wall = time.perf_counter() - start
    result = job.result()
    return {"wall": wall, "loop": result.loop_time_s, "loss": result.final_val_loss}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=600)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from data_prep.testing import tiny_dataset
    from scaling.warmstart.server import warm_python

    with tempfile.TemporaryDirectory(prefix="bench-warm-") as tmp:
        root = Path(tmp)
        data = tiny_dataset(root / "data")
        _run(root, data, None, "first", 2)  # creates the MLflow store: not timed
        runs: dict[str, list[dict]] = {"cold": [], "warm": []}
        with warm_python(root / "server") as python:
            for i in range(args.pairs):
                runs["cold"].append(_run(root, data, None, f"cold{i}", args.steps))
                runs["warm"].append(_run(root, data, python, f"warm{i}", args.steps))
    losses = {r["loss"] for arm in runs.values() for r in arm}
    if len(losses) != 1:
        raise SystemExit(f"warm and cold cells differ: final losses {sorted(losses)}")
    med = {
        arm: {k: statistics.median(r[k] for r in rs) for k in ("wall", "loop")}
        for arm, rs in runs.items()
    }
    print(f"{args.pairs} cells each, {args.steps} steps, interleaved; final loss equal bitwise")
    print(f"{'start':<6}{'job wall s':>12}{'loop s':>10}{'outside loop s':>16}")
    for arm in ("cold", "warm"):
        m = med[arm]
        print(f"{arm:<6}{m['wall']:>12.2f}{m['loop']:>10.2f}{m['wall'] - m['loop']:>16.2f}")
    outside = {arm: med[arm]["wall"] - med[arm]["loop"] for arm in med}
    print(f"warm/cold job wall: {med['warm']['wall'] / med['cold']['wall']:.2f}")
    print(f"warm/cold time outside the loop: {outside['warm'] / outside['cold']:.2f}")


if __name__ == "__main__":
    main()
