"""`Study`: a shipped study loaded once, planned and its status read, with nothing trained."""

from __future__ import annotations

from foundation import contract as C
from scaling.costs.plan import plan_study
from scaling.spec.loader import read_study
from scaling.study import Study
from tests.shipped import shipped_study


def test_a_shipped_study_plans_and_reads_its_status_without_training(tmp_path) -> None:
    path = shipped_study("demo", tmp_path)
    study = Study.load(path, check_environment=False)

    assert study.name == "demo" and study.folder == tmp_path / "runs" / "demo"
    plan = study.plan()
    assert [r.cell_id for r in plan.rows] == [c.cell_id for c in study.resolved.cells]
    assert plan == plan_study(read_study(path))  # the verb is the planner's, nothing added
    rows = study.status()  # no store yet: every cell pending, and none made by reading
    assert [r.cell_id for r in rows] == [c.cell_id for c in study.resolved.cells]
    assert {r.state for r in rows} == {C.PENDING}
    assert not (study.folder / "mlflow.db").exists()
    assert study.report().verdict is None  # never analysed
