"""A read-only spell of the study folder mid-study (issue 55, case 11): the driver goes on.

`scaling run` on the local executor, two real cells one at a time. While the first trains, the
study folder becomes immutable (`chattr +i`: no file can be made or renamed in it, even by root),
so the driver cannot record the second cell's job when the first ends. It used to die in the
thread that starts cells (an `OSError` traceback) while its watcher showed the second cell
queued forever. Now it says so, tries again, and once the folder is writable the study ends.

Slow (about 36 s on 2 busy cores): the hang was between a real driver's threads, so a real
driver runs two real 80-step cells; the spell itself lasts a few seconds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from foundation import contract as C
from jobs.telemetry.spool import last_logged_step
from scaling.state.files.job_records import read_records
from scaling.state.status import study_status
from tests.scaling.conftest import one_size_spec
from tests.scaling.helpers import poll, write_and_load

pytestmark = pytest.mark.slow  # two real cells and a warm-start server: about 36 s on 2 busy cores


def _immutable(folder: Path, on: bool) -> None:
    subprocess.run(["chattr", "+i" if on else "-i", str(folder)], check=True)


def test_the_driver_survives_a_read_only_spell_and_goes_on(tmp_path, data_dir, mlflow_server):
    if shutil.which("chattr") is None:
        pytest.skip("needs chattr")
    spec = one_size_spec(
        data_dir, tmp_path / "study", mlflow_server, 80, variants=["linear"], seeds=[0, 1]
    )
    spec["local"] = {"max_parallel": 1, "timeout_min": 20}
    path = tmp_path / "study.yaml"
    study = write_and_load(spec, path)
    folder = study.folder
    outputs = [Path(c.run.output_dir) for c in study.cells]
    log = tmp_path / "driver.log"
    with open(log, "wb") as out:
        driver = subprocess.Popen(
            [sys.executable, "-m", "scaling", "run", str(path), "--no-analyze"],
            cwd=tmp_path,
            env={**os.environ, "OMP_NUM_THREADS": "1", "SCALING_POLL_S": "0.5"},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        first = poll(
            lambda: next((o for o in outputs if last_logged_step(str(o))), None),
            600,
            lambda: f"a cell training:\n{log.read_text()}",
            every_s=0.1,
        )
        try:
            _immutable(folder, True)
        except subprocess.CalledProcessError:
            pytest.skip("this file system has no immutable flag")
        try:
            poll(lambda: (first / "result.json").is_file(), 600, "the first cell's result")
            poll(lambda: "cannot write" in log.read_text(), 120, lambda: log.read_text())
            time.sleep(2)  # the spell lasts a while
        finally:
            _immutable(folder, False)
        code = driver.wait(timeout=600)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    text = log.read_text()
    assert code == 0, text
    assert "Traceback" not in text, text
    assert f"wrote {folder / 'jobs.json'} after" in text, text
    assert {r.state for r in study_status(study)} == {C.COMPLETED}, text
    assert all(r.failures == 0 for r in read_records(folder).values())
