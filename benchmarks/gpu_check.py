"""The first GPU hour in one command: `scripts/gpu_check.sh [--tiny] [--out DIR]`.

Runs three parts one after another, each whatever became of the others, and writes one JSON of
figures (`gpu_check.json`):
1. `pytest -m gpu` (tests/jobs/test_gpu.py): both engines in bf16, preempt and resume;
2. `benchmarks/gpu_124m.py`: the paper's 124M shape, linear vs nonlinear: MFU, tokens/s, peak
   memory, the step-time ratio;
3. `benchmarks/trajectory_check.py`: 50 bf16 steps on the GPU against the paper's loop in fp32.

The whole fits within 8 minutes on one H100-class GPU. `--tiny` runs the same three parts on a
CPU (the GPU tests skip with their reason, the benchmarks take their tiny shapes and 12 steps),
so CI proves the script before any device appears. Exit status 1 names the parts that failed.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(name: str, command: list[str], log: Path) -> dict:
    """One part in its own process; its exit code, wall time and log, never an exception."""
    start = time.monotonic()
    with log.open("w") as out:
        done = subprocess.run(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    tail = log.read_text(errors="replace").splitlines()[-15:]
    print(f"[{name}] exit {done.returncode} in {time.monotonic() - start:.0f} s", flush=True)
    return {"rc": done.returncode, "seconds": round(time.monotonic() - start, 1), "tail": tail}


def _pytest_counts(lines: list[str]) -> dict[str, int]:
    """pytest's closing counts ("3 passed, 7 skipped in 2.1s")."""
    counts = {}
    for line in lines:
        for number, word in re.findall(r"(\d+) (passed|failed|skipped|errors?)", line):
            counts[word] = int(number)
    return counts


def _finite(value):
    """Plain JSON: a figure that could not be measured (NaN memory on a CPU) becomes null."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return None if isinstance(value, float) and value != value else value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tiny", action="store_true", help="the same parts on a CPU, tiny")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "gpu_check")
    args = parser.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    tiny = ["--tiny"] if args.tiny else []
    parts = {
        "pytest_gpu": [python, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider",
                       "tests/jobs/test_gpu.py"],
        "gpu_124m": [python, "benchmarks/gpu_124m.py", *tiny, "--out", str(out)]
        + (["--steps", "12"] if args.tiny else []),
        # --tiny proves the part's wiring in 12 steps: the 50-step fp32 match on a CPU is
        # tests/jobs/loop/test_trajectory.py's (the same setup, tests/jobs/loop/trajectory.py)
        "trajectory": [python, "benchmarks/trajectory_check.py", *tiny, "--out", str(out)]
        + (["--steps", "12"] if args.tiny else []),
    }  # fmt: skip
    report: dict = {"tiny": args.tiny, "parts": {}}
    for name, command in parts.items():
        report["parts"][name] = _run(name, command, out / f"{name}.log")
    report["parts"]["pytest_gpu"]["counts"] = _pytest_counts(report["parts"]["pytest_gpu"]["tail"])
    figures: dict = {}
    bench = out / "gpu_124m.json"
    if bench.is_file():
        data = json.loads(bench.read_text())
        figures["device"] = data["device"]
        figures["matmul_tflops"] = data["matmul_flops_per_s"] / 1e12
        keys = ("mfu", "tokens_per_s", "peak_memory_gib", "step_time_s", "error")
        for arm, row in data["arms"].items():
            figures[arm] = {k: row.get(k) for k in keys}
        times = [data["arms"].get(a, {}).get("step_time_s") for a in ("nonlinear", "linear")]
        if all(times):
            figures["step_time_ratio"] = times[0] / times[1]
    trajectory = out / "trajectory.json"
    if trajectory.is_file():
        arms = json.loads(trajectory.read_text())["arms"]
        figures["trajectory_gap"] = {
            arm: {k: row[k] for k in ("precision", "max_rel_gap", "mean_rel_gap_last10", "passed")}
            for arm, row in arms.items()
        }
    report["figures"] = figures
    failed = [name for name, part in report["parts"].items() if part["rc"] != 0]
    report["failed"] = failed
    (out / "gpu_check.json").write_text(json.dumps(_finite(report), indent=2, allow_nan=False))
    print(json.dumps(figures, indent=2))
    print(f"gpu_check: {'FAILED: ' + ', '.join(failed) if failed else 'all parts passed'}")
    print(f"figures: {out / 'gpu_check.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
