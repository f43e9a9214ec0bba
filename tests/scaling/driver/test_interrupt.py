"""Ctrl-C at the terminal of `scaling run`: one line, exit 130, nothing counted as a failure.

A real terminal (a pty, so the interrupt is the terminal's SIGINT to the whole foreground
process group), real tiny cells on the local executor and a real MLflow server.
"""

from __future__ import annotations

import os
import pty
import select
import sys
import time
from pathlib import Path

import pytest

from foundation import contract as C
from foundation.process.proc import kill_tree
from jobs.telemetry.upload import METRIC_QUEUE_S
from jobs.testing import PauseFiles
from scaling.backends.queued import QUEUED
from scaling.state.files.job_records import read_records
from scaling.state.status import study_status
from tests.scaling.conftest import one_size_spec
from tests.scaling.helpers import study_runs, write_and_load

pytestmark = pytest.mark.slow

HOLD_STEP = 8  # of STEPS
STEPS = 24  # a cell held at HOLD_STEP until let go, so its length does not race the test


class Terminal:
    """`python -m scaling ARGS` on its own pty; collects what it writes."""

    def __init__(self, *args: str, cwd: Path, env: dict[str, str] | None = None) -> None:
        env = dict(os.environ, COLUMNS="80", LINES="24", TERM="xterm", **(env or {}))
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: a session leader whose terminal is the pty
            os.chdir(cwd)
            os.execve(sys.executable, [sys.executable, "-m", "scaling", *args], env)
        self.out = b""

    def read(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:  # the child closed the terminal
                    return
                if not chunk:
                    return
                self.out += chunk

    def wait(self, timeout_s: float) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.read(0.5)
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.read(10.0)  # to the end: also what its children still write there
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
        # the driver and all it started (controllers and the warm server run in sessions of
        # their own, its cells under them): left alive, a cell trains on to its timeout
        kill_tree(self.pid)
        os.waitpid(self.pid, 0)
        raise AssertionError(f"still running after {timeout_s} s:\n{self.text}")

    @property
    def text(self) -> str:
        return self.out.decode(errors="replace").replace("\r", "")


def _states(study) -> dict[str, str]:
    return {r.cell_id: r.state for r in study_status(study)}


def test_ctrl_c_leaves_unstarted_cells_pending_and_the_rerun_continues(
    tmp_path, data_dir, mlflow_server
):
    # 4 cells (seeds 0-3) of one size, one at a time; each under a second of training
    spec = one_size_spec(
        data_dir, tmp_path / "study", mlflow_server, STEPS, variants=["linear"], seeds=[0, 1, 2, 3]
    )
    spec["local"] = {"max_parallel": 1, "timeout_min": 20}
    spec["retries"] = 0  # any interrupted cell counted as a failure would be given up on
    path = tmp_path / "study.yaml"
    study = write_and_load(spec, path)

    # every cell holds after step HOLD_STEP until let go: the first is let go and completes,
    # the second holds, and Ctrl-C comes while it trains (a cell of a few seconds could end
    # between the status read and the Ctrl-C on a loaded machine, and the test raced it)
    pause = PauseFiles(tmp_path / "pause", HOLD_STEP)
    term = Terminal("run", str(path), "--no-analyze", cwd=tmp_path, env=pause.env())
    cells = [c.cell_id for c in study.cells]
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:  # interrupt once one cell is done and the next trains
        term.read(0.5)
        held = [c for c in cells if pause.reached(c)]
        if held and not any(pause.released(c) for c in cells):
            pause.release(held[0])
        rows = study_status(study)
        running = [
            r
            for r in rows
            if r.state == C.RUNNING
            and r.step
            and r.cell_id in held
            and not pause.released(r.cell_id)
        ]
        if any(r.state == C.COMPLETED for r in rows) and running:
            break
    else:
        raise AssertionError(f"no cell completed while the next trained:\n{term.text}")
    # `status` shows how far the running cell is, from its spool
    assert running[0].num_steps == STEPS and 0 < running[0].step <= HOLD_STEP, running
    os.write(term.fd, b"\x03")  # Ctrl-C: the terminal's SIGINT to its foreground group
    code = term.wait(120)
    text = term.text

    assert code == 130, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    assert "View run" not in text and "INFO" not in text, text  # MLflow's own lines: --verbose
    states = _states(study)
    done = sum(s == C.COMPLETED for s in states.values())
    cancelled = sum(s == C.CANCELLED for s in states.values())
    pending = sum(s == C.PENDING for s in states.values())
    assert done >= 1 and cancelled == 1 and done + cancelled + pending == 4, states
    line = f"interrupted: {done} completed, {cancelled} cancelled, {pending} not started"
    assert text.count("interrupted:") == 1 and f"{line}; run again to continue" in text, text
    never_started = {cid for cid, state in states.items() if state == C.PENDING}
    records = read_records(study.folder)
    assert not any(r.job_id.startswith(QUEUED) for r in records.values()), records
    assert all(r.failures == 0 for r in records.values()), records

    rerun = Terminal("run", str(path), "--no-analyze", cwd=tmp_path)
    code = rerun.wait(900)
    lines = rerun.text.strip().splitlines()
    assert lines[0] == f"study folder: {study.folder}", rerun.text
    assert lines[1] == f"study tiny-study: 4 cells, {done} already done", rerun.text
    assert code == 0, rerun.text  # with retries 0: nothing was counted against them
    assert set(_states(study).values()) == {C.COMPLETED}
    assert all(r.failures == 0 for r in read_records(study.folder).values())

    # one run per cell, each starting when its training started: one cell at a time, so each
    # starts after the one before it ended, and the time it waited is its own metric
    runs = sorted(
        (r for r in study_runs(study) if r.data.tags.get("scaling.role") != "study"),
        key=lambda r: r.info.start_time,
    )
    assert len(runs) == 4, [r.data.tags.get("cell_id") for r in runs]
    for before, after in zip(runs, runs[1:], strict=False):
        assert after.info.start_time >= before.info.end_time - 1000  # ms; clocks of one host
    assert all(METRIC_QUEUE_S in r.data.metrics for r in runs)
    # the rerun submitted its cells at once, before the first never-started one trained
    fresh = [r for r in runs if r.data.tags["cell_id"] in never_started]
    first, last = fresh[0], fresh[-1]
    waited = (last.info.start_time - first.info.start_time) / 1000
    assert waited > 0 and last.data.metrics[METRIC_QUEUE_S] >= waited - 1.0


def test_a_second_quick_ctrl_c_does_not_cut_the_cleanup_short(tmp_path, data_dir, mlflow_server):
    """Issue 55, case 13: Ctrl-C twice, a moment apart, while a cell trains and another waits:
    the second is held until the cells are stopped. The running cell is cancelled (its job gone,
    its run KILLED), the queued one left pending, nothing counted as a failure. About 47 s on 2
    busy cores (slow, as this module): a real terminal, driver, warm server and training cell."""
    spec = one_size_spec(
        data_dir, tmp_path / "study", mlflow_server, 100_000, variants=["linear"], seeds=[0, 1]
    )
    spec["local"] = {"max_parallel": 1, "timeout_min": 20}
    path = tmp_path / "study.yaml"
    study = write_and_load(spec, path)

    term = Terminal("run", str(path), "--no-analyze", cwd=tmp_path)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:  # interrupt once a cell trains
        term.read(0.5)
        if any(r.state == C.RUNNING and r.step for r in study_status(study)):
            break
    else:
        raise AssertionError(f"no cell trained:\n{term.text}")
    records = read_records(study.folder)
    (running,) = [r for r in records.values() if not r.job_id.startswith(QUEUED)]
    os.write(term.fd, b"\x03")
    term.read(0.3)
    os.write(term.fd, b"\x03")  # the second, while the first is stopping the cells
    code = term.wait(180)
    text = term.text

    assert code == 130, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    assert "stopping the cells first" in text, text
    assert not Path(f"/proc/{running.job_id}").exists()  # its controller and task have ended
    states = _states(study)
    assert sorted(states.values()) == [C.CANCELLED, C.PENDING], states
    assert states[running.cell_id] == C.CANCELLED, states
    records = read_records(study.folder)
    assert not any(r.job_id.startswith(QUEUED) for r in records.values()), records
    assert all(r.failures == 0 for r in records.values()), records
