"""What would resolve each unresolved downstream task (``analysis.stats.resolve.tasks``):
verdict.json's ``resolve.tasks``, the report's rows, and the predicted chance to resolve
calibrated against what the task's own verdict reads once the seeds are run.

Truths chosen here: synthetic tasks (``analysis.synthetic.downstream.task_study``) with a true
gain in bits per byte and seed noise from Student's t on 3 df (heavy tails the predictive's
normal model does not assume). Calibration: ``CAL_STUDIES`` studies, a true gain uniform in
+-2% at 3 sizes, 3 seeds judged by ``downstream_verdict``; each of the task's seed options
priced, then the study with that many more seeds judged again (the same truth, the same first
seeds). A bin of ``n`` predictions passes when its realised rate is within
``2.58 sqrt(p (1 - p) / n) + 0.05`` of its mean prediction ``p``, as the loss's options'
(tests/analysis/stats/resolve/test_options.py); bins under 20 are not judged. Measured on 400
studies (912 priced options): predicted 0.05 / 0.30 / 0.51 / 0.71 / 0.86, realised 0.08 / 0.36
/ 0.48 / 0.75 / 0.85 in the five bins.
"""

from __future__ import annotations

import numpy as np
import pytest

from analysis.api import run_analysis
from analysis.judgement import table_judgement
from analysis.stats.axes.downstream import downstream_verdict
from analysis.stats.gains.levels import size_weights
from analysis.stats.resolve.summary import flops_cost
from analysis.stats.resolve.tasks import task_evidence, task_options
from analysis.synthetic.downstream import task_study

CAL_STUDIES = 150
START_SEEDS = 3
BINS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0 + 1e-9)
JUDGEMENT = table_judgement("linear", num_resamples=400)


def test_each_unresolved_task_is_priced_by_seeds_at_its_own_level(tmp_path) -> None:
    table = task_study({"big": 6.0, "small": 0.4, "null": 0.0}, num_seeds=3, rng_seed=11)
    verdict = run_analysis(table, table_judgement("linear", num_resamples=200), tmp_path)
    words = {t: r["nonlinear"]["verdict"] for t, r in verdict["downstream"]["tasks"].items()}
    assert words["big"] == "helps"
    unresolved = {t for t, w in words.items() if w in ("undetected", "inconclusive")}
    assert unresolved and set(verdict["resolve"]["tasks"]) == unresolved
    for task in unresolved:
        entry = verdict["resolve"]["tasks"][task]["nonlinear"]
        row = verdict["downstream"]["tasks"][task]["nonlinear"]
        assert entry["word"] == row["verdict"] and entry["num_seeds"] == 3
        holm = row["level"] or 0.05 / verdict["downstream"]["family"]  # None: step-down stopped
        assert entry["level"] == pytest.approx(holm * size_weights(3)[-1])
        assert entry["options"] and {o["kind"] for o in entry["options"]} == {"seeds"}
        assert entry["size"] == "30M"  # the top
    report = (tmp_path / "report.md").read_text()
    assert all(f"nonlinear on {task}" in report for task in unresolved)


def _calibration_study(i: int) -> list[tuple[float, bool]]:
    gain = float(np.random.default_rng([i, 5]).uniform(-2.0, 2.0))
    full = task_study({"t": gain}, num_seeds=START_SEEDS + 8, rng_seed=3000 + i)
    now = full[full["seed"] < START_SEEDS]
    verdict = {
        "variants": [{"variant": "nonlinear", "baseline": "linear"}],
        "downstream": downstream_verdict(now, JUDGEMENT, i),
    }
    out = []
    for ev in task_evidence(verdict, now).values():
        for option in task_options(ev, flops_cost):
            m = sum(c["variant"] == "linear" for c in option.cells)
            later = downstream_verdict(full[full["seed"] < START_SEEDS + m], JUDGEMENT, i)
            word = later["tasks"]["t"]["nonlinear"]["verdict"]
            out.append((option.p_resolve, word not in ("undetected", "inconclusive")))
    return out


@pytest.mark.slow
def test_a_tasks_predicted_chance_to_resolve_is_what_its_next_verdict_reads() -> None:
    found = np.array([r for i in range(CAL_STUDIES) for r in _calibration_study(i)], dtype=float)
    judged = 0
    for lo, hi in zip(BINS, BINS[1:], strict=False):
        inside = found[(found[:, 0] >= lo) & (found[:, 0] < hi)]
        if len(inside) < 20:
            continue
        p, real = inside[:, 0].mean(), inside[:, 1].mean()
        assert abs(real - p) <= 2.58 * np.sqrt(p * (1 - p) / len(inside)) + 0.05, (lo, p, real)
        judged += 1
    assert judged >= 4, found
