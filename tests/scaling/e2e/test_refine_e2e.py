"""LR search end to end: real tiny models, real MLflow, the local executor and real Slurm.

The starting grid misses both optima on purpose: linear's is below its best LR (about 1e-2 for
this 30K model over 12 steps: 1e-3 -> 7.50, 1e-2 -> 6.62, 1e-1 -> 6.89), nonlinear's above it
(0.1 -> 6.91, and 1.0 diverges). A 10x step makes the margins far larger than seed noise. The
search must end with both optima interior and every cell run exactly once in MLflow, also
after a crash between rounds and a Ctrl-C in the middle of one.
"""

from __future__ import annotations

import time

import pytest
from mlflow.tracking import MlflowClient

from analysis.stats.lr.frontier import lr_frontier
from analysis.tables.mlflow_io import load_study_runs as load_table
from foundation import contract as C
from scaling.driver.environment import load_study_spec
from scaling.driver.run import run_study
from scaling.driver.submission import study_parent_run_id
from scaling.lr_search.extend_grid import advance, status_lines
from scaling.state.files.job_records import read_records
from scaling.state.files.search_state import STATE_FILE, read_state
from scaling.state.status import study_status
from scaling.study import Study
from tests.reliability.helpers import kill_group, start_cli
from tests.scaling.conftest import one_size_spec
from tests.scaling.helpers import poll, study_runs, write_and_load

pytestmark = pytest.mark.slow

STEPS = 12
GRID = {"linear": {"30K": [1e-3, 1e-2]}, "nonlinear": {"30K": [0.1, 1.0]}}
SEARCH = {"max_rounds": 3, "scan_seeds": 1, "follow_neighbours": 1}


def _spec(tmp_path, data_dir, uri, **overrides) -> dict:
    return one_size_spec(
        data_dir,
        tmp_path / "study",
        uri,
        STEPS,
        seeds=[0, 1],
        lr={"law": "none", "grid": GRID, "search": SEARCH},
        local={"max_parallel": 2, "timeout_min": 20},
        **overrides,
    )


def _check_finished(study, uri: str) -> dict:
    """Both optima interior, one MLflow run per cell, each tagged with its round."""
    state = read_state(study.folder)
    assert state.ended and state.open_arms == [] and state.stopped_arms == []
    children = [r for r in study_runs(study) if r.data.tags.get(C.TAG_ROLE) != C.ROLE_STUDY]
    ids = [r.data.tags[C.TAG_CELL_ID] for r in children]
    assert sorted(ids) == sorted(c.cell_id for c in study.cells)  # each cell once, no extras
    rounds = {r.data.tags[C.TAG_CELL_ID]: int(r.data.tags[C.TAG_ROUND]) for r in children}
    assert rounds == {c.cell_id: c.round for c in study.cells}
    table, _ = load_table(uri, study.mlflow.experiment, study.name)
    final = {f.variant: f for f in lr_frontier(table)}
    assert final["linear"].best_lr == pytest.approx(1e-2) and final["linear"].state == "interior"
    assert final["nonlinear"].best_lr == pytest.approx(1e-2)
    assert final["nonlinear"].state == "interior"
    # the follower seed ran each winner and its neighbours: linear 1e-3..0.1, nonlinear 1e-3..0.1
    followed = sorted(c.lr for c in study.cells if c.seed == 1)
    assert followed == pytest.approx([1e-3, 1e-3, 1e-2, 1e-2, 0.1, 0.1])
    parent = MlflowClient(uri).get_run(study_parent_run_id(study))
    assert parent.info.status == "FINISHED"
    return {"cells": len(study.cells), "rounds": state.round}


def test_local_search_ends_interior_and_resumes_without_duplicates(
    tmp_path, data_dir, mlflow_server
):
    path = tmp_path / "study.yaml"
    study = write_and_load(_spec(tmp_path, data_dir, mlflow_server), path)
    assert sorted((c.variant, c.lr, c.seed) for c in study.cells) == [
        ("linear", 1e-3, 0),
        ("linear", 1e-2, 0),
        ("nonlinear", 0.1, 0),
        ("nonlinear", 1.0, 0),
    ]  # round 0: the starting grid, by the scan seed only
    start = time.monotonic()
    Study(study).submit(rounds=False, end_parent=False)  # round 0 alone

    # crash between rounds: the round is decided again from MLflow, to the same state file
    said: list[str] = []
    advance(study, say=said.append)
    written = (study.folder / STATE_FILE).read_text()
    (study.folder / STATE_FILE).unlink()
    round1 = advance(study, say=said.append)
    assert (study.folder / STATE_FILE).read_text() == written
    added = sorted((c.variant, c.lr) for c in round1.cells if c.round == 1)
    assert added == [("linear", pytest.approx(0.1)), ("nonlinear", pytest.approx(0.01))]
    assert any("LR-search round 1: 2 LR(s) added" in line for line in said)

    # crash mid-round: `scaling submit` and its cells killed once a round-1 cell has started
    submit = start_cli(["submit", str(path)], tmp_path / "submit.log", tmp_path)
    try:
        poll(
            lambda: any(
                r.job_id.isdigit() and r.cell_id in {c.cell_id for c in round1.cells if c.round}
                for r in read_records(study.folder).values()
            ),
            600,
            "a round-1 cell to start",
        )
    finally:
        kill_group(submit)

    messages: list[str] = []
    outcome = run_study(load_study_spec(path), out_dir=tmp_path / "report", say=messages.append)
    finished = load_study_spec(path)
    figures = _check_finished(finished, mlflow_server)
    lines = status_lines(finished, study_status(finished))  # what `scaling status` adds
    assert lines[0] == "lr search: ended"
    # what `best` reads: the study has no selection windows (num_select_windows: 0)
    assert lines[1] == "lr search: best LR by val/loss (num_select_windows: 0, no selection set)"
    assert "lr search: linear 30K best 0.01 interior" in lines
    report = (tmp_path / "report" / "report.md").read_text()
    assert "LR search: 3 round(s)" in report
    assert outcome.verdict["lr_search"]["open_arms"] == []
    print(
        f"[lr-search local] {figures['cells']} cells in {figures['rounds']} rounds "
        f"(starting grid 4), {time.monotonic() - start:.0f} s"
    )


def test_slurm_search_submit_queues_one_round_and_run_finishes_it(
    tmp_path, data_dir, mlflow_server, slurm_cluster
):
    overrides = {
        "executor": "slurm",
        "slurm": {"time_limit_min": 20, "array_parallelism": 2, "cpus_per_task": 1},
    }
    path = tmp_path / "study.yaml"
    study = write_and_load(_spec(tmp_path, data_dir, mlflow_server, **overrides), path)
    start = time.monotonic()
    queued = Study(study).submit()  # Slurm: returns once round 0 is queued
    assert len(queued.submitted) == 4 and not (study.folder / STATE_FILE).exists()
    parent = MlflowClient(mlflow_server).get_run(queued.parent_run_id)
    assert parent.info.status == "RUNNING"
    run_study(
        load_study_spec(path), analyze=False, say=print
    )  # waits, then drives the later rounds
    figures = _check_finished(load_study_spec(path), mlflow_server)
    print(
        f"[lr-search slurm] {figures['cells']} cells in {figures['rounds']} rounds, "
        f"{time.monotonic() - start:.0f} s"
    )
