"""`scaling plan`'s wall-clock estimate against the measured wall time of the same study.

    .venv/bin/python benchmarks/bench_plan_wall.py          # the CI-sized copy of the demo
    .venv/bin/python benchmarks/bench_plan_wall.py --full   # studies/demo.yaml itself (~15 min)
    .venv/bin/python benchmarks/bench_plan_wall.py --pilot  # `scaling pilot` first (not timed)

The study's data is prepared first (not timed); then `scaling run --no-analyze` is timed from
start to exit, beside what `plan` said for it: the estimate with no LR-search round, and with
every round, and for the rounds that actually ran (the same arithmetic over the cells the search
added). Target: measured / planned within 0.75-1.25. With `--pilot`, `scaling pilot` runs first
(not timed) and the plan prices the cells it measured from the pilot's tokens/s, as a user's
plan does after a pilot.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _spec(workdir: Path, full: bool) -> Path:
    if full:
        spec = yaml.safe_load((REPO / "studies" / "demo.yaml").read_text())
        # its own folder and store: the demo's ../runs/demo would be the one a previous run left
        spec["output_dir"] = "runs/demo"
        spec["mlflow"]["tracking_uri"] = "sqlite:///runs/demo/mlflow.db"
    else:
        from tests.scaling.helpers import ci_demo_spec

        spec = ci_demo_spec(workdir)
    path = workdir / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="studies/demo.yaml, not the CI copy")
    parser.add_argument("--pilot", action="store_true", help="run `scaling pilot` before planning")
    args = parser.parse_args()
    from scaling.costs.plan import plan_study
    from scaling.costs.wall import rounds_seconds, wall_estimate
    from scaling.driver.environment import load_study_spec
    from scaling.driver.submission import prepare_study_data

    with tempfile.TemporaryDirectory(prefix="bench-plan-wall-") as tmp:
        workdir = Path(tmp)
        os.chdir(workdir)  # the study's relative paths (its folder, its store) as `run` sees them
        path = _spec(workdir, args.full)
        prepare_study_data(load_study_spec(path, check_environment=False))
        if args.pilot:
            pilot = [sys.executable, "-m", "scaling", "pilot", str(path)]
            done = subprocess.run(pilot, cwd=workdir, capture_output=True, text=True)
            if done.returncode != 0:
                tail = done.stderr[-3000:]
                raise SystemExit(f"scaling pilot failed ({done.returncode}):\n{tail}")
        study = load_study_spec(path)
        estimate = wall_estimate(study, plan_study(study))
        start = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "scaling", "run", str(path), "--no-analyze"],
            cwd=workdir,
            capture_output=True,
            text=True,
        )
        measured = time.monotonic() - start
        if proc.returncode != 0:
            raise SystemExit(f"scaling run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        final = load_study_spec(path)  # with the cells the LR search added
        ran = rounds_seconds(final, plan_study(final))
        num_rounds = len({c.round for c in final.cells})
        # the same with no start-up: what the measurement leaves per cell beside the FLOPs
        bare = dataclasses.replace(final.spec.cost, startup_s=0.0, step_s=0.0)
        final.spec.cost = bare
        compute = rounds_seconds(final, plan_study(final))
        slots = final.spec.local.max_parallel
        implied = (measured - compute) / (len(final.cells) / slots)  # no cell runs alone at the end
    print(f"study: {'studies/demo.yaml' if args.full else 'the CI-sized copy of the demo'}", end="")
    print(", priced from `scaling pilot`" if args.pilot else ", priced from cost.*")
    print(f"cells: {len(study.cells)} in the starting grid; {len(final.cells)} ran, ", end="")
    print(f"in {num_rounds} rounds")
    print(f"plan, no round:      {estimate.seconds:8.1f} s")
    print(f"plan, every round:   {estimate.worst_seconds:8.1f} s")
    print(f"plan, rounds run:    {ran:8.1f} s")
    print(f"measured (run):      {measured:8.1f} s")
    print(f"measured / planned:  {measured / ran:8.2f}  (target 0.75-1.25)")
    steps = sum(c.run.train.steps for c in final.cells) / len(final.cells)
    print(f"beside the FLOPs the measurement implies {implied:.1f} s per cell ", end="")
    print(f"(cells of {steps:.0f} steps on average; cost.startup_s + steps x cost.step_s)")


if __name__ == "__main__":
    main()
