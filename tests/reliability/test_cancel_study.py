"""`scaling cancel` while `scaling run` is still watching: the study stops, the round is not
judged with the cancelled cells and no next LR-search round is started; `scaling run` again
goes on and finishes it.

Real tiny cells (the CI copy of the demo, one size, 2 arms x 3 LRs in the first round, all six
running at once so none waits in the local queue), the local executor, a SQLite MLflow store.
Every cell holds at step 8 (`jobs.testing.PauseFiles`); the linear arm's are let go and finish,
the nonlinear arm's are held until the cancel kills them.
"""

from __future__ import annotations

import json

import pytest
import yaml
from mlflow.tracking import MlflowClient

from scaling.driver.submission import study_parent_run_id
from scaling.spec.loader import read_study
from scaling.state.files.cancel_mark import CANCEL_FILE
from scaling.state.files.job_records import read_records
from scaling.state.status import study_status
from tests.reliability.helpers import kill_group, start_cli, wait_held
from tests.scaling.helpers import ci_demo_spec, poll, scaling_cli

pytestmark = pytest.mark.slow

HOLD_STEP = 8  # of 24


def _spec(tmp_path) -> dict:
    spec = ci_demo_spec(tmp_path)
    spec["name"] = "cancel-ci"
    spec["mlflow"] = {"experiment": "cancel-ci", "tracking_uri": "sqlite:///mlruns/mlflow.db"}
    spec["sizes"] = keep = spec["sizes"][:1]
    for by_size in (
        spec["ladder"].get("shapes", {}),
        spec["tokens"]["per_size"],
        *spec["lr"].get("grid", {}).values(),
    ):
        for size in [s for s in by_size if s not in keep]:
            del by_size[size]
    spec["seeds"] = [0, 1]
    spec["local"] = {**spec.get("local", {}), "max_parallel": 6}  # the first round at once
    return spec


def test_a_cancel_stops_the_watching_run_and_a_run_again_goes_on(tmp_path, hold_at):
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(_spec(tmp_path)))
    folder = tmp_path / "runs" / "cancel-ci"
    pause = hold_at(HOLD_STEP)
    log = tmp_path / "run1.log"
    run = start_cli(["run", str(path)], log, tmp_path, env=pause.env())
    try:
        names = _first_round_cells(run, log, folder)
        wait_held(pause, names, alive=run, log=log, timeout_s=600)
        # the linear arm's three cells finish; the nonlinear arm's are cancelled mid-run, so
        # the round judged with them would give linear its next LRs or its followers
        done = [n for n in names if "-linear-" in n]
        for name in done:
            pause.release(name)
        poll(lambda: _completed(path, done), 300, lambda: log.read_text()[-3000:])
        out = scaling_cli("cancel", str(path), cwd=tmp_path).stdout
        assert "cancelled 3 job(s)" in out and "no further cells start" in out, out
        code = run.wait(timeout=300)
    finally:
        if run.poll() is None:
            kill_group(run)
    text = log.read_text()
    assert code == 3, text[-3000:]
    assert "study cancelled by `scaling cancel` at" in text, text[-3000:]
    assert "the study was cancelled (exit status 3)" in text

    # the round was not judged with its cancelled cells: nothing beyond the first round
    assert sorted(read_records(folder)) == sorted(names)
    search = folder / "lr_search.json"
    assert not search.is_file() or json.loads(search.read_text())["added"] == []
    states = {r.cell_id: r.state for r in study_status(read_study(path))}
    assert states == {n: "completed" if n in done else "cancelled" for n in names}, states
    assert not (folder / "analysis" / "verdict.json").exists()
    study = read_study(path)
    client = MlflowClient(study.mlflow.tracking_uri)
    assert client.get_run(study_parent_run_id(study)).info.status == "KILLED"
    status = scaling_cli("status", str(path), cwd=tmp_path).stdout
    assert "study cancelled by `scaling cancel` at" in status and "cancelled" in status

    # a run again removes the mark, resubmits the cancelled cells and finishes the study
    again = scaling_cli("run", str(path), cwd=tmp_path).stdout
    assert "going on with the study cancelled at" in again, again[-3000:]
    assert not (folder / CANCEL_FILE).exists()
    assert json.loads(search.read_text())["ended"]
    study = read_study(path)
    assert client.get_run(study_parent_run_id(study)).info.status == "FINISHED"
    assert (folder / "analysis" / "verdict.json").is_file()
    assert "study cancelled" not in scaling_cli("status", str(path), cwd=tmp_path).stdout


def _completed(path, names: list[str]) -> bool:
    rows = {r.cell_id: r.state for r in study_status(read_study(path))}
    return all(rows.get(n) == "completed" for n in names)


def _first_round_cells(run, log, folder) -> list[str]:
    """The first round's six cell ids, once the run has recorded a real job for each."""

    def started() -> list[str] | None:
        assert run.poll() is None, log.read_text()[-3000:]
        records = read_records(folder)
        real = [c for c, r in records.items() if not r.job_id.startswith("queued-")]
        return sorted(real) if len(real) == 6 else None

    return poll(started, 600, lambda: log.read_text()[-3000:])
