"""A study's SQLite store deleted after its cells completed (issue 39, D8): `scaling run
--new-store` (the fix the one-line error names) uploads each completed cell's results from its
folder into the fresh store: no cell trained again or given up, one run per cell, every metric
point once, and the analysis's inputs (final metrics) there. Real local jobs, real SQLite."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest
import yaml

from foundation import contract as C
from scaling.records.job_records import read_records
from scaling.rounds.driver import submit_study
from scaling.rounds.environment import load_study_spec
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


# 40-60 s on 2 busy cores (submit 20-35 s, run ~25 s): two real cells train, two stores made
@pytest.mark.slow
def test_completed_cells_are_uploaded_again_into_a_new_store(tmp_path, data_dir):
    store = tmp_path / "mlflow.db"
    spec = one_size_spec(data_dir, tmp_path / "study", f"sqlite:///{store}", STEPS, retries=0)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = load_study_spec(path, check_environment=False)
    submit_study(study)
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
