"""`scaling cancel` of a local `scaling run` whose cells wait for a slot: the run says the study
was cancelled and exits 3 (docs/studies.md), not "interrupted ... run again" and 130.

The waiting cells' `queued-` records name the run itself, so the cancel stops them by
interrupting it (SIGINT); the run must take that for the cancel it is. Real tiny cells, one at a
time (`local.max_parallel: 1`): the first holds at a step until the cancel, the others wait.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from foundation.process.proc import kill_tree
from jobs.testing import PauseFiles
from scaling.backends.queued import QUEUED
from scaling.state.files.job_records import read_records
from scaling.study import Study
from tests.scaling.conftest import one_size_spec
from tests.scaling.helpers import poll, write_and_load

pytestmark = pytest.mark.slow

HOLD_STEP = 4  # of 200


def test_a_cancel_of_a_run_whose_cells_wait_ends_it_cancelled_not_interrupted(
    tmp_path, data_dir, mlflow_server
):
    spec = one_size_spec(
        data_dir, tmp_path / "study", mlflow_server, 200, variants=["linear"], seeds=[0, 1, 2]
    )
    spec["local"] = {"max_parallel": 1, "timeout_min": 20}
    path = tmp_path / "study.yaml"
    study = write_and_load(spec, path)
    cells = [c.cell_id for c in study.cells]
    pause = PauseFiles(tmp_path / "pause", HOLD_STEP)
    log = tmp_path / "run.log"
    with open(log, "wb") as out:
        run = subprocess.Popen(
            [sys.executable, "-m", "scaling", "run", str(path), "--no-analyze"],
            cwd=tmp_path,
            env={**os.environ, **pause.env(), "OMP_NUM_THREADS": "1"},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:

        def one_holds_and_the_others_wait() -> bool:
            assert run.poll() is None, log.read_text()[-3000:]
            records = read_records(study.folder)
            queued = [c for c, r in records.items() if r.job_id.startswith(QUEUED)]
            return any(pause.reached(c) for c in cells) and len(queued) == 2

        poll(one_holds_and_the_others_wait, 600, lambda: log.read_text()[-3000:])
        result = Study(study).cancel()
        assert sorted(result.cells) == sorted(cells), result  # the held one and the waiting
        code = run.wait(timeout=300)
    finally:
        pause.release_all()
        if run.poll() is None:
            kill_tree(run.pid)
            run.wait()
    text = log.read_text()
    assert code == 3, text[-3000:]
    assert "study cancelled by `scaling cancel` at" in text, text[-3000:]
    assert "the study was cancelled (exit status 3)" in text, text[-3000:]
    assert "interrupted:" not in text, text[-3000:]
