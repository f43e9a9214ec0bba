"""Same verdicts before and after a refactor of the analysis: dump, then compare byte for byte.

Runs ~30 synthetic studies through the public API (``analysis.api.run_analysis`` with a
``table_judgement``; the sequential design through ``analysis.stats.looks.replay.replay``, which
calls ``decide_look`` as a study's looks do) and writes each verdict.json, report.md and the
replayed looks into one folder per study. Run it once per code tree, then compare:

    PYTHONPATH=/tmp/base .venv/bin/python benchmarks/same_verdicts.py dump /tmp/h4/pre
    PYTHONPATH=. .venv/bin/python benchmarks/same_verdicts.py dump /tmp/h4/post
    .venv/bin/python benchmarks/same_verdicts.py compare /tmp/h4/pre /tmp/h4/post

The studies are those of ``tests/analysis/stats/looks/test_sequential.py`` (a constant compute
multiplier at 0, the margin and beyond, 7 seeds, replayed under its design and at a naive 5%),
the imperfect studies of ``analysis.synthetic.scenarios`` (an LR at the grid's edge, a lucky
survivor, unmatched budgets, ...), and a law study judged at another margin, level, seed and
detect gain (each setting the builder takes, so a default lost below it shows). The demo's own
outputs are compared by ``benchmarks/same_reanalysis.sh``. Cost: ~5 s a study on one core.
"""

from __future__ import annotations

import dataclasses
import filecmp
import inspect
import json
import sys
from pathlib import Path

import numpy as np

NUM_STUDIES = 30
NUM_DRAWS = 130  # as test_sequential: look 2's interval resolved
SIZES = tuple(float(x) for x in np.geomspace(1.2e6, 1e8, 4))
SCENARIOS = (
    "smaller_variant",
    "worse_but_steeper",
    "baseline_lr_edge",
    "lucky_survivor",
    "unmatched_budget",
)


def _replay(full, design, draws: int):
    """``replay`` with the design's boundaries and at a naive 5%, whichever signature it has
    (a design and a baseline, or a judgement)."""
    from analysis.stats.looks.replay import replay

    params = inspect.signature(replay).parameters
    if "judgement" in params:
        from analysis.judgement import table_judgement

        j = table_judgement("linear", num_resamples=draws, design=design)
        return replay(full, j, levels=(None, 0.05))
    return replay(full, design, baseline="linear", num_resamples=draws, levels=(None, 0.05))


def study(i: int, out: Path) -> None:
    """Study ``i``'s verdict.json and report.md (and for a sequential one, its looks) in ``out``."""
    from analysis.api import run_analysis
    from analysis.judgement import table_judgement
    from analysis.stats.looks.sequential import Design
    from analysis.synthetic.scenarios import compute_law_study, scenario

    kind = i % 3
    if kind == 0:  # test_sequential's study: k0 1 (null), ~the margin, 1.3
        k0 = (1.0, 1.12, 1.3)[(i // 3) % 3]
        design = Design(start=3, max=7, step=2)
        full = compute_law_study(k0, 0.0, 20_000 + i, num_seeds=7, sizes=SIZES, run_sd=0.0065)
        looks = []
        for rep in _replay(full, design, NUM_DRAWS):
            looks.append([_plain(dataclasses.asdict(look)) for look in rep.looks])
        (out / "looks.json").write_text(json.dumps(looks, indent=1, sort_keys=True))
        table, judgement = full, table_judgement("linear", num_resamples=NUM_DRAWS, seed=i)
    elif kind == 1:
        table = scenario(SCENARIOS[(i // 3) % len(SCENARIOS)], i)
        judgement = table_judgement("linear", num_resamples=200, seed=i)
    else:  # every setting the builder takes, off its default
        table = compute_law_study(1.2, 0.02, i, num_seeds=5, sizes=SIZES, run_sd=0.006)
        judgement = table_judgement(
            "linear", margin_pct=0.3, alpha=0.1, seed=i + 5, num_resamples=150, detect_gain_pct=1.5
        )
    run_analysis(table, judgement, out)
    for name in list(out.iterdir()):
        if name.suffix in (".png", ".svg"):  # matplotlib's bytes are not the analysis's
            name.unlink()


def _plain(value):
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def dump(folder: Path, indices: list[int]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in indices:
        out = folder / f"study-{i:02d}"
        out.mkdir(exist_ok=True)
        try:
            study(i, out)
        except ValueError as err:  # a refusal is an outcome too: it must be the same one
            (out / "refused.txt").write_text(f"{err}\n")
        print(f"study {i}: {sorted(p.name for p in out.iterdir())}", flush=True)


def compare(a: Path, b: Path) -> int:
    """0 when every file under ``a`` is in ``b`` byte for byte and nothing else is."""
    diff = []
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    if files_a != files_b:
        diff.append(f"file lists differ: {set(files_a) ^ set(files_b)}")
    for rel in files_a:
        if (b / rel).is_file() and not filecmp.cmp(a / rel, b / rel, shallow=False):
            diff.append(f"differs: {rel}")
    print("\n".join(diff) or f"{len(files_a)} files byte-identical")
    return 1 if diff else 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["dump"] and len(argv) >= 2:
        picks = [int(x) for x in argv[2:]] or list(range(NUM_STUDIES))
        dump(Path(argv[1]), picks)
        return 0
    if argv[:1] == ["compare"] and len(argv) == 3:
        return compare(Path(argv[1]), Path(argv[2]))
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
