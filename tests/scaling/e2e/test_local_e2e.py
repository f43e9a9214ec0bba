"""End to end with the local executor (the default): real jobs, a real MLflow server."""

from __future__ import annotations

import math
import threading

import pytest
from mlflow.tracking import MlflowClient

from data_prep.testing import tiny_config
from foundation.config import to_dict
from jobs.testing import PauseFiles
from scaling.driver.submission import study_parent_run_id
from scaling.state.files.job_records import read_records
from scaling.state.status import study_status
from scaling.study import Study
from tests.scaling.conftest import one_size_spec, small_spec
from tests.scaling.helpers import checkpoint_steps, poll, study_runs, write_and_load

pytestmark = pytest.mark.slow


def test_local_study_runs_with_bounded_concurrency_and_resubmit_is_a_noop(
    tmp_path, data_dir, mlflow_server
):
    # 4 cells: sizes 30K (1 rank) and 60K (2 ranks) x arms linear and wider_mlp; 2 at a time
    spec = small_spec(data_dir, tmp_path / "study", mlflow_server, variants=["linear", "wider_mlp"])
    study = write_and_load(spec, tmp_path / "study.yaml")
    messages: list[str] = []
    peak = {"running": 0}

    def on_progress(msg: str) -> None:
        messages.append(msg)
        running = sum(m.startswith("started") for m in messages) - sum(
            m.startswith("ended") for m in messages
        )
        peak["running"] = max(peak["running"], running)

    result = Study(study, on_progress).submit(rounds=False)
    assert len(result.submitted) == 4
    assert peak["running"] == 2  # never more than local.max_parallel at once

    rows = study_status(study)
    assert [r.state for r in rows] == ["completed"] * 4, rows
    assert all(math.isfinite(r.val_loss) for r in rows)
    children = [r for r in study_runs(study) if r.data.tags.get("scaling.role") != "study"]
    assert sorted(r.data.tags["cell_id"] for r in children) == sorted(r.cell_id for r in rows)
    wider = [r for r in children if r.data.tags["variant"] == "wider_mlp"]
    assert all(r.data.params["model.ffn_hidden_size"] == "228" for r in wider)  # 4.75 x 48

    parent = study_parent_run_id(study)
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parent}
    client = MlflowClient(mlflow_server)
    assert [a.path for a in client.list_artifacts(parent)] == ["study.yaml"]  # the spec

    again = Study(study).submit(rounds=False)
    assert again.submitted == [] and len(study_runs(study)) == 5

    # the same cells under a changed recipe are refused, not silently mixed with old results
    spec["tokens"] = {"per_size": {"30K": 4096, "60K": 4096}}
    changed = write_and_load(spec, tmp_path / "changed.yaml")
    with pytest.raises(ValueError, match="different run config"):
        Study(changed).submit(rounds=False)
    assert len(study_runs(study)) == 5


def test_cancel_stops_a_running_local_cell_and_the_next_submit_retries_it(
    tmp_path, data_dir, mlflow_server, monkeypatch
):
    # the cell holds after step 10 (its checkpoint written) until the test lets it go, so the
    # cancel lands mid-run on any machine speed; the resumed cell trains the 20 steps left
    pause = PauseFiles(tmp_path / "pause", 10)
    for name, value in pause.env().items():
        monkeypatch.setenv(name, value)  # the local cells inherit the submitting process's
    spec = one_size_spec(
        data_dir,
        tmp_path / "study",
        mlflow_server,
        30,
        variants=["linear"],
        train={"checkpoint_interval": 10},
    )
    # the data is prepared by submit, from the spec's parameters
    spec["data"] = {"prepare": to_dict(tiny_config(tmp_path / "data")), "num_val_windows": 4}
    study = write_and_load(spec, tmp_path / "study.yaml")
    assert not (tmp_path / "data").exists()
    submitter = threading.Thread(target=Study(study).submit, kwargs={"rounds": False})
    submitter.start()
    try:
        # bounds for a hang only: submit prepares the data first (over 60 s at a load of 50)
        cid = poll(lambda: next(iter(read_records(study.folder)), None), 600, "a job record")
        poll(lambda: pause.reached(cid), 600, "the cell held at step 10")
        assert 10 in checkpoint_steps(str(study.folder / "cells" / cid))
        assert Study(study).cancel().cells == [cid]
    finally:
        pause.release_all()  # a resumed attempt starts at step 11 and never holds again
    submitter.join(timeout=60)
    assert not submitter.is_alive()
    (row,) = study_status(study)
    assert row.state == "cancelled"
    run_id = row.run_id

    again = Study(study).submit(rounds=False)
    assert again.submitted == [cid]
    (row,) = study_status(study)
    assert row.state == "completed" and row.run_id == run_id, row
