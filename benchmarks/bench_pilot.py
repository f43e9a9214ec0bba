"""What `scaling pilot` costs, beside what it measures: the demo study on this machine.

    .venv/bin/python benchmarks/bench_pilot.py [STUDY.yaml] [--steps 30] [--warmup 5]

Runs `scaling pilot` (as a user does, a subprocess) on a copy of the study whose output and
MLflow store live in a temporary folder, then prints side by side from that one run:
- the pilot's wall time, and as a share of the study's measured training time;
- the study's GPU-hours as `plan` assumed them (`cost.flops_per_gpu_s`) and as measured,
  and their ratio (how far off the assumption was here).
The study's data are prepared first when missing (not counted).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from foundation.process.quiet import silence_known_warnings
from scaling.costs.plan import plan_study
from scaling.driver.environment import load_study_spec
from scaling.driver.submission import prepare_study_data

REPO = Path(__file__).resolve().parents[1]
DEFAULT = REPO / "studies" / "demo.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    silence_known_warnings()

    with tempfile.TemporaryDirectory(prefix="bench-pilot-") as tmp:
        spec = yaml.safe_load(args.study.read_text())
        spec["output_dir"] = str(Path(tmp) / "study")
        spec["mlflow"]["tracking_uri"] = f"sqlite:///{tmp}/mlflow.db"
        path = Path(tmp) / "study.yaml"
        path.write_text(yaml.safe_dump(spec))
        os.chdir(args.study.resolve().parent.parent)  # the spec's relative data path
        study = load_study_spec(path, check_environment=False)
        prepare_study_data(study)
        assumed = plan_study(study)
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "scaling", "pilot", str(path)]
            + ["--steps", str(args.steps), "--warmup", str(args.warmup)],
            env={**os.environ, "OMP_NUM_THREADS": "1"},
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(proc.stdout[-3000:] + proc.stderr[-3000:])
        measured = plan_study(study)
    num_probes = sum(line.startswith("pilot ") for line in proc.stdout.splitlines())
    study_s = measured.gpu_hours * 3600
    print(f"study {study.name}: {measured.num_runs} cells, {num_probes} probes")
    print(
        f"scaling pilot ({args.warmup} + {args.steps} steps per probe): {wall:.1f} s wall, "
        f"{wall / num_probes:.1f} s per probe; {wall / study_s:.1%} of the measured "
        f"{study_s / 60:.1f} process-minutes of training its {measured.num_runs} planned cells"
    )
    print(
        f"GPU-hours: assumed {assumed.gpu_hours:.4g}, measured {measured.gpu_hours:.4g} "
        f"(measured/assumed {measured.gpu_hours / assumed.gpu_hours:.2f}); checkpoints kept "
        f"{measured.checkpoint_bytes / 1e6:.1f} MB"
    )


if __name__ == "__main__":
    main()
