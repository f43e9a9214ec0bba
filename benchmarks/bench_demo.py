"""The demo as a user runs it: `scaling run studies/demo.yaml` end to end, timed; then the
seed-to-seed sd of every arm as % of its loss (the yardstick: <= 0.3%) and the paired
gain its seeds can detect, per size, read from the study's verdict.json.

    .venv/bin/python benchmarks/bench_demo.py                 # a fresh run in a temp folder
    .venv/bin/python benchmarks/bench_demo.py --existing DIR  # only read DIR/runs/demo/...

The run starts from nothing (the data is prepared again, a new MLflow store), in a temporary
working folder, so its wall time is what a first `scaling run` costs after set-up.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_demo(workdir: Path) -> float:
    """Wall seconds of `scaling run studies/demo.yaml` run in `workdir`."""
    spec = workdir / "studies" / "demo.yaml"
    spec.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "studies" / "demo.yaml", spec)
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "scaling", "run", str(spec)], cwd=workdir, text=True
    )
    wall = time.monotonic() - start
    if proc.returncode not in (0, 3):  # 3: some cells failed; the report still says what is
        raise SystemExit(f"scaling run failed with exit status {proc.returncode}")
    return wall


def report(workdir: Path) -> None:
    study = workdir / "runs" / "demo"
    verdict = json.loads((study / "analysis" / "verdict.json").read_text())
    search = study / "lr_search.json"
    if search.is_file():
        state = json.loads(search.read_text())
        added = sum(len(a["seeds"]) for a in state["added"])
        print(f"lr search: {added} cells added, arms left at an edge: {state['open_arms'] or 0}")
    print("| size | arm | seeds | seed sd % of loss | paired sd % | detectable gain % |")
    print("|---|---|---|---|---|---|")
    for row in verdict["seed_noise"]:
        cells = [row["size"], row["variant"], str(row["num_seeds"])]
        for key in ("seed_sd_pct", "paired_diff_sd_pct", "mde_pct"):
            value = row.get(key)
            cells.append("" if value is None else f"{value:.2f}")
        print("| " + " | ".join(cells) + " |")
    worst = max((r["seed_sd_pct"] or 0.0) for r in verdict["seed_noise"])
    print(f"largest seed sd: {worst:.2f}% of the loss (target <= 0.3%)")
    for entry in verdict["variants"]:
        print(f"verdict {entry['variant']}: {entry['verdict']} ({entry['reason']})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--existing", type=Path, help="a folder where the demo already ran")
    args = parser.parse_args()
    if args.existing:
        report(args.existing)
        return
    with tempfile.TemporaryDirectory(prefix="bench-demo-") as tmp:
        wall = run_demo(Path(tmp))
        print(f"\ndemo wall time: {wall:.0f} s ({wall / 60:.1f} min) for `scaling run`")
        report(Path(tmp))


if __name__ == "__main__":
    main()
