"""A variant edited while `scaling run` runs: the run stops before any analysis (issue 36).

The user's own variant lives beside the study file (`python_path: src`). Its cells are
recorded in a real MLflow store (the tests' server) as `submit` creates their runs and their
jobs record them (`jobs.telemetry.record.start` / `finish` through the job's own `Tracker`, today's
code digest included); nothing trains. Then the variant's file is edited while `scaling run` waits
on its round: the run stops with one error line naming the stale cells and both fixes, exit 2,
and nothing is judged (no verdict.json, no `analysis/` on the parent run, no look, no LR-search
round). `scaling status` shows the cells stale, LR-search lines included, without crashing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import scaling.driver.round_driver
from analysis.tables.digests import judged_digests
from analysis.tables.mlflow_io import load_study_runs
from foundation import contract as C
from jobs.telemetry import record
from jobs.telemetry.record import LossHistory, RunResult
from jobs.telemetry.tracking import Tracker
from models.accounting import flops_per_token
from scaling.cli import app
from scaling.driver.environment import load_study_spec
from scaling.looks.sequential_seeds import take_look
from scaling.state.files.look_state import read_looks
from scaling.state.files.search_state import read_state
from scaling.state.mlflow_state import (
    client_for,
    ensure_cell_run,
    ensure_parent_run,
    find_parent_run,
)
from scaling.state.stale import ACCEPT, StaleCode, settle_stale
from scaling.state.status import study_status
from tests.scaling.conftest import one_size_spec

REPO = Path(__file__).resolve().parents[3]
# two LRs an arm, the higher one best: judged, the search would add a round at each edge
GRID = {"linear": {"30K": [1e-3, 3e-3]}, "gated": {"30K": [1e-3, 3e-3]}}
SEARCH = {"max_rounds": 2, "scan_seeds": 1, "follow_neighbours": 0}


def _study(tmp_path: Path, data_dir: Path, uri: str, module: str, **extra) -> tuple[Path, Path]:
    """(study file, the variant's file) of a 30K study of linear and the user's gated query,
    in its own `module` (a module imported once stays imported: one name a test)."""
    folder = tmp_path / "mystudy"
    (folder / "src").mkdir(parents=True)
    variant = folder / "src" / f"{module}.py"
    shutil.copy(REPO / "tests" / "variants" / "gated.py", variant)
    spec = one_size_spec(data_dir, Path("runs/tiny"), uri, 4)
    spec.update(name="tiny", python_path="src", variants=["linear", f"{module}:gated_query"])
    spec.update(extra)
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path, variant


def _record_finished(study) -> None:
    """Each cell's run as `submit` makes it and its job records it (tags, summary metrics,
    artifacts, FINISHED), with a loss lowest at LR 3e-3; no training."""
    client = client_for(study)
    parent = ensure_parent_run(study, client)
    exp_id = C.experiment_id(client, study.mlflow.experiment)
    for cell in study.cells:
        cell = cell.with_parent(parent)
        ensure_cell_run(client, exp_id, parent, cell, None)
        steps, tokens = cell.run.train.steps, cell.tokens
        loss = 4.0 + abs(cell.lr - 3e-3) * 10 + 0.01 * cell.seed
        tracker = Tracker(cell.run.output_dir, cell.run.tracking, cell.cell_id)
        record.start(tracker, cell.run, 1, resumed=False)
        history = LossHistory(steps, tokens, losses=[loss + 1] * steps, val_losses=[[steps, loss]])
        result = RunResult(C.COMPLETED, loss, steps, tokens)
        record.finish(tracker, cell.run, result, history, flops_per_token(cell.run.model))
        assert tracker.close(timeout_s=60), tracker.last_error


def _edit(variant: Path) -> None:
    """The user's edit: the gate's pre-activation doubled."""
    source = variant.read_text()
    edited = source.replace("torch.sigmoid(gate)", "torch.sigmoid(2 * gate)")
    assert edited != source
    variant.write_text(edited)


def test_a_variant_edited_while_run_waits_stops_it_before_any_analysis(
    tmp_path, data_dir, mlflow_server, monkeypatch
):
    path, variant = _study(
        tmp_path,
        data_dir,
        mlflow_server,
        "my_gated",
        lr={"law": "none", "grid": GRID, "search": SEARCH},
    )
    study = load_study_spec(path, check_environment=False)
    _record_finished(study)
    gated = sorted(c.cell_id for c in study.cells if c.variant == "gated")
    real = scaling.driver.round_driver.submit_due

    def submit_then_edit(*args, **kwargs):
        submitted = real(*args, **kwargs)  # every cell finished: nothing to train
        _edit(variant)  # while `run` waits on its round
        return submitted

    monkeypatch.setattr(scaling.driver.round_driver, "submit_due", submit_then_edit)
    ran = CliRunner().invoke(app, ["run", str(path)], env={"COLUMNS": "250"})
    assert ran.exit_code == 2, ran.output
    error = [line for line in ran.output.splitlines() if line.startswith("error:")]
    assert len(error) == 1, ran.output
    assert f"{len(gated)} finished cell(s)" in error[0] and gated[0] in error[0]
    assert "variants my_gated:gated_query" in error[0] and "nothing judged" in error[0]
    assert "`scaling run STUDY --rerun-stale`" in error[0]
    assert "`scaling run STUDY --accept-stale`" in error[0]

    # nothing judged: no report, no analysis on the parent run, no LR-search round written
    assert not C.analysis_folder(study.name, study.spec.output_dir).exists()
    client = client_for(study)
    parent = client.get_run(find_parent_run(study, client))
    assert parent.info.status == "FAILED"  # as on any error; `run` sets it RUNNING again
    assert [a.path for a in client.list_artifacts(parent.info.run_id)] == ["study.yaml"]
    assert read_state(study.folder).round == 0 and read_state(study.folder).added == []

    # `status` marks them stale and its LR-search lines read them as the report would
    shown = CliRunner().invoke(app, ["status", str(path)], env={"COLUMNS": "250"})
    assert shown.exit_code == 0, shown.output
    assert shown.output.count("stale") >= len(gated), shown.output
    assert "lr search: gated 30K best 0.003 edge_high open" in shown.output, shown.output
    states = {r.cell_id: r.state for r in study_status(study)}
    assert {cid for cid, s in states.items() if s == C.STALE} == set(gated)

    # accepted: the report's table carries the digest each result stands for, one an arm
    settle_stale(study, ACCEPT)
    table, _ = load_study_runs(study.mlflow.tracking_uri, study.mlflow.experiment, study.name)
    digests = judged_digests(table)
    assert {v: d["num_runs"] for v, d in digests.items()} == {"gated": 2, "linear": 2}
    assert all(len(d["digests"]) == 1 for d in digests.values()), digests
    (accepted,) = digests["gated"]["digests"]
    runs = {r.data.tags[C.TAG_CELL_ID]: r for r in _cell_runs(client, study)}
    assert {runs[cid].data.tags[C.TAG_CODE_ACCEPTED] for cid in gated} == {accepted}
    assert runs[gated[0]].data.tags[C.TAG_CODE_DIGEST] != accepted  # trained by the old code


def _cell_runs(client, study) -> list:
    exp = client.get_experiment_by_name(study.mlflow.experiment)
    found = client.search_runs([exp.experiment_id], f"tags.{C.TAG_STUDY} = '{study.name}'")
    return [r for r in found if C.TAG_CELL_ID in r.data.tags]


def test_a_look_is_not_judged_on_cells_whose_code_changed(tmp_path, data_dir, mlflow_server):
    seeds = {"start": 3, "max": 5, "step": 1}
    lr = {"law": "none", "grid": {"linear": {"30K": [3e-3]}, "gated": {"30K": [3e-3]}}}
    path, variant = _study(tmp_path, data_dir, mlflow_server, "my_gated_look", seeds=seeds, lr=lr)
    study = load_study_spec(path, check_environment=False)
    _record_finished(study)
    _edit(variant)
    with pytest.raises(StaleCode, match="3 finished cell\\(s\\).*--accept-stale"):
        take_look(study, study_status(study), say=lambda _msg: None)
    assert read_looks(study.folder)["looks"] == []  # nothing written, nothing logged
    parent = client_for(study).get_run(find_parent_run(study))
    assert not any(k.startswith("look/") for k in parent.data.metrics)
