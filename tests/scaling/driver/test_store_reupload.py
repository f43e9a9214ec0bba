"""A study's SQLite store deleted after its cells completed (issue 39, D8): `scaling run
--new-store` (the fix the one-line error names) uploads each completed cell's results from its
folder into the fresh store: no cell trained again or given up, one run per cell, every metric
point once, and the analysis's inputs (final metrics) there. Real local jobs, real SQLite."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from foundation import contract as C
from foundation.config import dump_file
from jobs.config import TrackingConfig
from jobs.telemetry.record import RunResult, write_result
from jobs.telemetry.spool import SPOOL
from jobs.telemetry.tracking import Tracker
from scaling.driver.environment import load_study_spec
from scaling.driver.reupload import reupload_results
from scaling.state.files.job_records import read_records
from scaling.study import Study
from tests.scaling.conftest import one_size_spec

STEPS = 6


def _scaling(*args: str, cwd) -> subprocess.CompletedProcess:
    """`python -m scaling ARGS` as a user runs it, in a process of its own: this test's process
    keeps MLflow's handle on the deleted store (MLflow caches an open store per process)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "scaling", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _children(store) -> dict[str, list[tuple[int, float]]]:
    """cell id -> its run's train/loss points (step, value), read from the SQLite file."""
    with sqlite3.connect(store) as db:
        runs = db.execute(
            "select r.name, r.run_uuid from runs r join tags t on t.run_uuid = r.run_uuid "
            "where t.key = ? and r.lifecycle_stage = 'active'",
            (C.TAG_PARENT,),
        ).fetchall()
        query = "select step, value from metrics where run_uuid = ? and key = ? order by step"
        return {name: db.execute(query, (rid, C.TRAIN_LOSS)).fetchall() for name, rid in runs}


# 35-100 s on 2 cores, idle to busy (submit, run --new-store, a run that retrains a cell): two
# real cells train, three stores made
@pytest.mark.slow
def test_completed_cells_are_uploaded_again_into_a_new_store(tmp_path, data_dir):
    store = tmp_path / "mlflow.db"
    spec = one_size_spec(data_dir, tmp_path / "study", f"sqlite:///{store}", STEPS, retries=0)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = load_study_spec(path, check_environment=False)
    Study(study).submit(rounds=False)
    before = _children(store)
    assert len(before) == 2 and all(len(h) == STEPS for h in before.values()), before
    records = read_records(study.folder)
    results = {c.cell_id: (study.folder / "cells" / c.cell_id / "result.json") for c in study.cells}
    written = {cid: p.stat().st_mtime_ns for cid, p in results.items()}

    store.unlink()  # the store is lost; every cell's folder stays
    fixed = _scaling("run", str(path), "--no-analyze", "--new-store", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-3000:]
    assert fixed.stdout.count("from its folder into run") == 2, fixed.stdout

    assert _children(store) == before  # one run per cell, every point once, the same values
    with sqlite3.connect(store) as db:
        ended = db.execute(
            "select r.status, t.value from runs r join tags t on t.run_uuid = r.run_uuid "
            "where t.key = ? and r.name != ?",
            (C.TAG_OUTCOME, study.name),
        ).fetchall()
        finals = db.execute(
            "select count(*) from latest_metrics where key in (?, ?)", (C.FINAL_VAL_LOSS, C.FLOPS)
        ).fetchone()[0]
    assert ended == [("FINISHED", C.COMPLETED)] * 2 and finals == 4, (ended, finals)
    assert read_records(study.folder) == records  # no job submitted: nothing trained again
    assert {cid: p.stat().st_mtime_ns for cid, p in results.items()} == written
    # not given up: `run` exits 0 only when every cell has its result (3 if one failed)

    # issue 55 #10: a spool cut short after its cell ended, and the store lost again. It is
    # named, not "uploaded" as a RUNNING run with half its points; its cell trains afresh (the
    # same points: an exact CPU replay) and the other cell is uploaded, in one plain `run`
    cut = study.cells[0]
    spool = Path(cut.run.output_dir) / SPOOL
    lines = spool.read_bytes().splitlines(keepends=True)
    spool.write_bytes(b"".join(lines[: len(lines) // 2]))
    store.unlink()
    again = _scaling("run", str(path), "--no-analyze", "--new-store", cwd=tmp_path)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert f"not uploaded {cut.cell_id}: {spool} stops at line" in again.stdout, again.stdout
    assert again.stdout.count("from its folder into run") == 1, again.stdout
    assert _children(store) == before
    retrained = read_records(study.folder)
    assert retrained[cut.cell_id].submitted_at > records[cut.cell_id].submitted_at
    assert {c: r for c, r in retrained.items() if c != cut.cell_id} == {
        c: r for c, r in records.items() if c != cut.cell_id
    }


def _trained_folder(cell, old_store: str) -> Path:
    """A completed cell's folder as training leaves it (run config, result, spool sealed at the
    end; a checkpoint), its spool written through a real tracker into a store since lost."""
    out = Path(cell.run.output_dir)
    out.mkdir(parents=True)
    dump_file(cell.run, out / "run_config.yaml")
    old = TrackingConfig(tracking_uri=old_store, experiment=f"lost-{uuid.uuid4().hex}")
    tracker = Tracker(out, old, run_name=cell.cell_id)
    for step in range(1, STEPS + 1):
        tracker.log_metrics({C.TRAIN_LOSS: 10.0 / step}, step=step)
    tracker.log_metrics({C.FINAL_VAL_LOSS: 1.5}, step=STEPS)
    tracker.set_tags({C.TAG_OUTCOME: C.COMPLETED})
    tracker.set_status("FINISHED")
    tracker.seal()
    assert tracker.close(timeout_s=30)
    write_result(cell.run, RunResult(C.COMPLETED, 1.5, STEPS, STEPS * 256))
    (out / "checkpoints" / f"step_{STEPS:08d}").mkdir(parents=True)
    return out


def test_a_cut_or_damaged_spool_is_reported_and_its_cell_trains_again(
    tmp_path, data_dir, mlflow_server
):
    """Issue 55 #9 and #10, the store lost: a spool with one binary line crashed the replay
    (UnicodeDecodeError, a run left RUNNING); a cut one was "uploaded" as a RUNNING run with
    part of its points, its cell then failing on every rerun. Now a replay sends whole spools
    only: a cut or damaged one is named (file, line), gets no run, and its cell's outputs are
    set aside so that the next submit trains it afresh. A spool from before seals, ending with
    its run's end status, is whole."""
    spec = one_size_spec(data_dir, tmp_path / "study", mlflow_server, STEPS, seeds=[0, 1])
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = load_study_spec(path, check_environment=False)
    whole, cut, damaged, unsealed = study.cells
    outs = {c.cell_id: _trained_folder(c, mlflow_server) for c in study.cells}
    spool = {cid: out / SPOOL for cid, out in outs.items()}
    lines = spool[cut.cell_id].read_bytes().splitlines(keepends=True)
    spool[cut.cell_id].write_bytes(b"".join(lines[:3]))  # 3 of 6 points, no end
    lines = spool[damaged.cell_id].read_bytes().splitlines(keepends=True)
    lines[1] = b"\x00\xff binary \xfe\n"
    spool[damaged.cell_id].write_bytes(b"".join(lines))
    lines = spool[unsealed.cell_id].read_bytes().splitlines(keepends=True)
    spool[unsealed.cell_id].write_bytes(b"".join(lines[:-1]))  # as written before seals

    said: list[str] = []
    assert reupload_results(study, said.append) == [whole.cell_id, unsealed.cell_id]
    text = "\n".join(said)
    assert (
        f"not uploaded {cut.cell_id}: {spool[cut.cell_id]} stops at line 3 before its run's "
        "end record (cut short)." in text
    ), text
    assert (
        f"not uploaded {damaged.cell_id}: {spool[damaged.cell_id]} was changed after its run "
        "ended (line 2 is damaged: not UTF-8)." in text
    ), text

    client = MlflowClient(mlflow_server)
    exp = client.get_experiment_by_name(study.mlflow.experiment)
    runs = client.search_runs([exp.experiment_id], f"tags.`{C.TAG_PARENT}` != ''")
    assert sorted((r.info.run_name, r.info.status) for r in runs) == sorted(
        [(whole.cell_id, "FINISHED"), (unsealed.cell_id, "FINISHED")]
    )
    for run in runs:  # every point once
        history = client.get_metric_history(run.info.run_id, C.TRAIN_LOSS)
        assert sorted(m.step for m in history) == list(range(1, STEPS + 1))
    for cell in (cut, damaged):  # nothing left that would stop it training afresh
        out = outs[cell.cell_id]
        assert not any((out / name).exists() for name in ("result.json", "tracking", "checkpoints"))
        (aside,) = (out / "set_aside").iterdir()
        assert (aside / SPOOL).is_file() and (aside / "result.json").is_file()
