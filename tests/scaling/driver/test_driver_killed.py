"""A driver SIGKILLed at five moments, then run again (issue 55, cases 12 and 14, and its goal).

`scaling run` on the local executor (real processes: the warm-start server, submitit
controllers, training tasks; a real MLflow server) is killed outright, no cleanup running:

1. before it submits anything (its lock taken, no job yet);
2. after it submitted a cell, before the cell trains (its controller just started);
3. while a cell it started trains;
4. after a cell finished, before the driver recorded it;
5. while it analyses (every cell ended; its warm server already stopped).

Each next run adopts the cells the killed one left running: it waits for them, never runs more
than `local.max_parallel` cells at once, and starts none of them again. Afterwards: no process
of any killed driver is left (no warm-start server, controller or task), every cell trained once
(one `started` line over all runs, one MLflow run), and no retry was charged (`retries: 0`, so a
charged failure would give the cell up; every record has 0 failures).

Slow (about 140 s on 2 busy cores): the moments only exist with real processes, so six real
drivers each import the CLI and MLflow and start a warm-start server, and four 80-step cells
train; one sequence covers the five moments rather than five studies.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from foundation import contract as C
from foundation.process.proc import children
from jobs.telemetry.spool import last_logged_step
from scaling.backends.queued import QUEUED
from scaling.state.files.driver_lock import LOCK_NAME, process_start
from scaling.state.files.job_records import read_records
from scaling.state.status import study_status
from tests.scaling.conftest import small_spec
from tests.scaling.helpers import study_runs, write_and_load

pytestmark = pytest.mark.slow  # six drivers and four real cells: about 140 s on 2 busy cores

STEPS = 80


class Driver:
    """`scaling run STUDY` in a session of its own; its output in a log file."""

    def __init__(self, path: Path, log: Path) -> None:
        self.log_path = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "scaling", "run", str(path)],
                cwd=path.parent,
                env={**os.environ, "OMP_NUM_THREADS": "1", "SCALING_POLL_S": "0.5"},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def started(self) -> list[str]:
        """The cells this driver started."""
        return [line.split()[1] for line in self.text.splitlines() if line.startswith("started ")]

    def kill(self) -> list[tuple[int, int | None]]:
        """SIGKILL the driver alone; every process it had (pid, start time) just before."""
        tree = [self.proc.pid]
        for pid in tree:
            tree.extend(children(pid))
        procs = [(pid, process_start(pid)) for pid in tree]
        assert self.proc.poll() is None, f"the driver ended before its moment:\n{self.text}"
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        return procs


def _controllers(folder: Path) -> list[int]:
    """The live submitit controllers of the study (its submitit folder in their command)."""
    found = []
    marker = str(folder / "submitit").encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"submitit.local._local" in cmdline and marker in cmdline:
            found.append(int(entry.name))
    return found


def test_a_driver_killed_at_five_moments_leaves_nothing_behind(tmp_path, data_dir, mlflow_server):
    spec = small_spec(
        data_dir,
        tmp_path / "study",
        mlflow_server,
        parallel={},
        tokens={"per_size": {"30K": STEPS * 256, "60K": STEPS * 256}},
    )
    spec["local"] = {"max_parallel": 1, "timeout_min": 20}
    spec["retries"] = 0  # a failure charged to any cell would give it up
    path = tmp_path / "study.yaml"
    study = write_and_load(spec, path)
    folder = study.folder
    outputs = {c.cell_id: Path(c.run.output_dir) for c in study.cells}
    most_at_once = 0

    def wait_for(driver: Driver, moment, what: str, timeout_s: float = 600) -> None:
        nonlocal most_at_once
        deadline = time.monotonic() + timeout_s
        while not moment():
            most_at_once = max(most_at_once, len(training()))
            assert driver.proc.poll() is None, f"ended before {what}:\n{driver.text}"
            assert time.monotonic() < deadline, f"no {what} in {timeout_s} s:\n{driver.text}"
            time.sleep(0.02)

    def records() -> dict:
        try:
            return read_records(folder)
        except (OSError, ValueError):  # being replaced
            return {}

    def done() -> set[str]:
        return {cid for cid, out in outputs.items() if (out / "result.json").is_file()}

    def training() -> set[str]:
        """The cells whose job is live and has no result yet (a controller outlives its
        task's result by a moment)."""
        live = {str(pid) for pid in _controllers(folder)}
        return {cid for cid, r in records().items() if r.job_id in live} - done()

    left: list[tuple[int, int | None]] = []
    drivers: list[Driver] = []

    def start() -> Driver:
        drivers.append(Driver(path, tmp_path / f"driver{len(drivers)}.log"))
        return drivers[-1]

    # 1. before it submits: its lock taken, no job recorded yet
    d = start()
    wait_for(d, lambda: (folder / LOCK_NAME).is_file() and not records(), "lock")
    left += d.kill()
    # 2. after it submitted a cell, before that cell trains: a controller started
    d = start()
    wait_for(
        d,
        lambda: any(not r.job_id.startswith(QUEUED) for r in records().values()),
        "controller",
    )
    left += d.kill()
    first = next(cid for cid, r in records().items() if not r.job_id.startswith(QUEUED))
    assert last_logged_step(str(outputs[first])) is None  # it had not trained a step
    # 3. while a cell it started trains
    d = start()
    wait_for(
        d,
        lambda: any(last_logged_step(str(outputs[c])) for c in d.started()),
        "cell of its own training",
    )
    left += d.kill()
    # 4. after a cell finished, before the driver saw it
    d = start()
    before = done()
    wait_for(d, lambda: (done() - before) & set(d.started()), "cell of its own finished")
    left += d.kill()
    # 5. while it analyses: every cell has its result, the driver's warm server has stopped
    d = start()
    wait_for(
        d,
        lambda: done() == set(outputs) and not children(d.proc.pid),
        "analysis",
    )
    left += d.kill()

    final = start()
    code = final.proc.wait(timeout=600)
    assert code in (0, 3), final.text  # 3: a 2-size study may be judged inconclusive
    assert "Traceback" not in final.text, final.text

    # no process of a killed driver is left: warm-start server, controller or task
    alive = [pid for pid, began in left if began is not None and process_start(pid) == began]
    assert alive == [], [Path(f"/proc/{p}/cmdline").read_bytes() for p in alive]
    assert _controllers(folder) == []
    assert most_at_once == 1, most_at_once  # adopted cells count against max_parallel
    # every cell trained once: started once over all drivers, one MLflow run
    starts = [cid for d in drivers for cid in d.started()]
    assert sorted(starts) == sorted(outputs), starts
    runs = [r for r in study_runs(study) if r.data.tags.get("scaling.role") != "study"]
    assert sorted(r.data.tags["cell_id"] for r in runs) == sorted(outputs)
    # no retry charged, nothing failed or given up
    assert all(r.failures == 0 for r in read_records(folder).values()), read_records(folder)
    assert {r.state for r in study_status(study)} == {C.COMPLETED}
    assert not any("gave up" in d.text or "retrying" in d.text for d in drivers)
    # no driver ever showed a cell failed: those a killed driver never started read pending
    failed = [
        ln for d in drivers for ln in d.text.splitlines() if re.search(r"[1-9]\d* failed", ln)
    ]
    assert failed == [], failed
    assert code == 3 or [json.loads(p.read_text()) for p in folder.rglob("verdict.json")]
