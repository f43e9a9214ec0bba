"""How long the orchestration itself takes: validating and planning a study, and asking its state.

    .venv/bin/python benchmarks/bench_orchestration.py [STUDY.yaml] [--mlflow URI]

Times `load_study_spec` (spec + every resolved run config, environment checks off), `plan_study`
and, with `--mlflow`, `study_status` of the same grid against that server (one search for all
cells, plus `squeue` if any job was recorded). The training itself is the jobs' business.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from scaling.costs.plan import plan_study
from scaling.driver.environment import load_study_spec
from scaling.state.status import study_status

DEFAULT = Path(__file__).resolve().parents[1] / "studies" / "ladder.yaml"


def _timed(fn, repeat: int = 3):
    best, value = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - start)
    return best, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--mlflow", help="tracking URI for the status timing (a running server)")
    args = parser.parse_args()

    load_s, study = _timed(lambda: load_study_spec(args.study, check_environment=False))
    plan_s, plan = _timed(lambda: plan_study(study))
    print(f"study {study.name}: {plan.num_runs} cells")
    print(f"load_study_spec (validate spec + {plan.num_runs} run configs): {load_s * 1e3:.0f} ms")
    print(f"plan_study: {plan_s * 1e3:.0f} ms ({plan.gpu_hours:.4g} GPU-hours planned)")
    if args.mlflow:
        study.mlflow.tracking_uri = args.mlflow
        status_s, rows = _timed(lambda: study_status(study))
        print(f"study_status ({len(rows)} rows, MLflow {args.mlflow}): {status_s * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
