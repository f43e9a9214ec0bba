"""`lr.search.find_edge` end to end: real tiny models (30K, 8 steps), real MLflow, the local
executor. Both arms start at LR 0.01 and 0.1, which train (tests/scaling/e2e/test_refine_e2e.py:
0.1 gives ~6.9 at 12 steps); the scan climbs one step (x30) to 3.0, where the loss runs away
and the trainer ends the cell as diverged. The report's Stability section names 0.1 as each
arm's largest stable LR."""

from __future__ import annotations

import math
import time

import pytest

from foundation import contract as C
from scaling.driver.environment import load_study_spec
from scaling.driver.run import run_study
from scaling.state.files.search_state import read_state
from tests.scaling.conftest import one_size_spec
from tests.scaling.helpers import write_and_load

pytestmark = pytest.mark.slow

STEPS = 8


def test_scan_climbs_to_a_real_divergence_and_the_report_names_the_edge(
    tmp_path, data_dir, mlflow_server
):
    spec = one_size_spec(
        data_dir,
        tmp_path / "study",
        mlflow_server,
        STEPS,
        lr={
            "law": "none",
            "grid": {"*": {"30K": [0.01, 0.1]}},
            "search": {"max_rounds": 1, "step_factor": 30, "find_edge": True},
        },
        local={"max_parallel": 2, "timeout_min": 20},
    )
    path = tmp_path / "study.yaml"
    write_and_load(spec, path)
    start = time.monotonic()
    outcome = run_study(load_study_spec(path), out_dir=tmp_path / "report", say=print)
    finished = load_study_spec(path)
    state = read_state(finished.folder)
    assert state.ended
    scans = [a for a in state.added if a.reason.startswith("find_edge")]
    assert sorted(a.variant for a in scans) == ["linear", "nonlinear"]
    assert all(a.lr == pytest.approx(3.0) for a in scans)
    table = {c.cell_id: c for c in finished.cells}
    diverged = [r for r in outcome.rows if r.state == C.DIVERGED]
    assert sorted(table[r.cell_id].lr for r in diverged) == pytest.approx([3.0, 3.0])

    stability = outcome.verdict["stability"]
    edges = {e["variant"]: e for e in stability["edges"]}
    for arm in ("linear", "nonlinear"):
        assert edges[arm]["max_stable_lr"] == pytest.approx(0.1)
        assert edges[arm]["first_diverged_lr"] == pytest.approx(3.0)
    assert stability["margin"] == {"30K": pytest.approx(0.0)}
    assert stability["verdict"] == "none"  # equal edges: no margin
    report = (tmp_path / "report" / "report.md").read_text()
    section = report[report.index("## Stability") :]
    assert "| linear | 30K | 0.1 | 3 |" in section and "**none**" in section
    # the real divergence is censored evidence: each arm's edge in [0.1, 3), the margin's
    # interval [log2(0.1 / 3), log2(3 / 0.1)] (nothing shown), the optimum bounded below 3
    assert all(e["edge_bounds"] == pytest.approx([0.1, 3.0]) for e in stability["edges"])
    assert stability["variants"][0]["margin_bounds"] == {
        "30K": pytest.approx([math.log2(0.1 / 3), math.log2(3 / 0.1)])
    }
    for row in outcome.verdict["lr_selection"]:
        assert row["censored_at"] == pytest.approx(3.0) and row["diverged_seeds"][0]
        assert row["optimum_interval"][1] <= 3.0
        assert f"{row['variant']} 30K: diverged at 3 (seed" in report
    assert report.count("optimum bounded below it") == 2
    excluded = report[report.index("## Excluded runs") :]
    assert all(f"| {r.run_id} |" in excluded for r in diverged)  # still named there
    print(f"[find_edge local] {len(finished.cells)} cells, {time.monotonic() - start:.0f} s")
