"""`scaling status` on a study never run creates nothing (docs/studies.md: status only reads),
also for a study with an LR search, whose status lines read the scan's runs."""

from __future__ import annotations

from tests.scaling.helpers import scaling_cli
from tests.shipped import shipped_study


def test_status_of_a_study_never_run_creates_no_store_and_says_so(tmp_path):
    study = shipped_study("demo", tmp_path)  # an LR search, a SQLite store under runs/demo
    out = scaling_cli("status", str(study), cwd=tmp_path).stdout
    assert "24 pending" in out
    assert "lr search: round 0 of at most 1; no cell has run yet" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["studies"]  # no runs/demo/mlflow.db
