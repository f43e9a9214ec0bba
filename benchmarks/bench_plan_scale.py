"""`scaling plan`'s cost against the grid's size, and the cap on it.

    .venv/bin/python benchmarks/bench_plan_scale.py            # 5,000, 10,000 and 20,000 cells
    .venv/bin/python benchmarks/bench_plan_scale.py 10000 40000

Copies studies/demo.yaml (its LR search off, so every seed runs every LR) with as many seeds as
make N cells, and times `scaling plan --no-check-environment` in-process: seconds per 10^4
cells and the process's peak memory, which should be flat (plan cost linear in the cells). Then
a grid of 10^6 cells, which must be refused at once by the cap (`scaling.spec.loader.MAX_CELLS`).
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from typer.testing import CliRunner  # noqa: E402

from scaling.cli import app  # noqa: E402


def study_file(folder: Path, num_cells: int) -> Path:
    spec = yaml.safe_load((REPO / "studies" / "demo.yaml").read_text())
    del spec["lr"]["search"]
    per_seed = len(spec["sizes"]) * len(spec["variants"]) * 3  # 3 LRs per (size, variant)
    spec["seeds"] = list(range(max(1, num_cells // per_seed)))
    path = folder / "studies" / f"grid-{num_cells}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def time_plan(path: Path) -> tuple[float, float, int, str]:
    start = time.perf_counter()
    result = CliRunner().invoke(app, ["plan", "--no-check-environment", str(path)])
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10  # KiB on Linux
    return seconds, peak, result.exit_code, result.output


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [5_000, 10_000, 20_000]
    with tempfile.TemporaryDirectory() as tmp:
        for num_cells in sizes:
            seconds, peak, code, out = time_plan(study_file(Path(tmp), num_cells))
            assert code == 0, out
            print(
                f"{num_cells:>9,} cells: plan {seconds:6.2f} s ({seconds / num_cells * 1e4:.2f} s "
                f"per 10^4 cells), process peak RSS so far {peak:.0f} MiB"
            )
        seconds, _, code, out = time_plan(study_file(Path(tmp), 1_000_000))
        print(f"1,000,000 cells: exit {code} after {seconds:.2f} s: {out.strip()[-200:]}")


if __name__ == "__main__":
    main()
