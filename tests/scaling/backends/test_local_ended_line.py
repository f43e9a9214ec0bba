"""A local cell whose job raised (its variant's file edited mid-study so that it no longer
imports) is said `failed`, with the error, not submitit's `FINISHED` (issue 54)."""

from __future__ import annotations

import time

import submitit

from scaling.backends.local.devices import DeviceSlots
from scaling.backends.local.round import LocalRound


def _import_a_broken_file() -> None:
    import no_such_module_of_the_users  # noqa: F401 - the failure under test


def test_a_job_that_raised_ends_failed_with_its_error_not_finished(tmp_path):
    executor = submitit.LocalExecutor(folder=tmp_path)
    executor.update_parameters(timeout_min=1)
    job = executor.submit(_import_a_broken_file)
    while not job.done():
        time.sleep(0.2)
    assert job.state == "FINISHED"  # submitit's word for a job whose function raised
    said, ended = _collect(job)
    assert said == [
        "ended c: failed (ModuleNotFoundError: No module named 'no_such_module_of_the_users')"
    ], said
    assert ended == {"c": "failed"}


def _collect(job) -> tuple[list[str], dict[str, str]]:
    """What a local round says and records when it collects `job`, ended, as cell `c`."""
    said: list[str] = []
    round_ = object.__new__(LocalRound)  # only what collecting an ended job reads
    round_.running, round_.held, round_.finished, round_.ended = {"c": job}, {}, {}, {}
    round_.devices, round_.say = DeviceSlots([]), said.append
    round_._collect_ended()
    return said, round_.ended


def _train_until_killed(started: str) -> None:
    with open(started, "w"):
        pass
    time.sleep(600)


def test_a_killed_job_is_said_failed_without_waiting_for_a_result(tmp_path, monkeypatch):
    """A cell whose controller was killed (a cancel, a Ctrl-C, the OOM killer) left no result:
    its round says so as soon as the controller is gone. submitit's own `LocalJob` polled for
    the missing pickle for 15 s, twice (state, then error line), so each killed cell held its
    round's end up by 30 s; the proof here is that nothing waits (`sleep` is refused)."""
    from foundation.process.proc import kill_tree
    from scaling.backends.local.session import SessionLocalExecutor

    executor = SessionLocalExecutor(folder=tmp_path / "jobs")
    executor.update_parameters(timeout_min=5)
    started = tmp_path / "started"
    job = executor.submit(_train_until_killed, str(started))
    deadline = time.monotonic() + 120
    while not started.exists():
        assert time.monotonic() < deadline and not job.done(), "the task never started"
        time.sleep(0.2)
    kill_tree(int(job.job_id))
    while not job.done():
        assert time.monotonic() < deadline, "the killed controller is still running"
        time.sleep(0.2)

    waits: list[float] = []

    def no_wait(seconds: float) -> None:
        waits.append(seconds)
        raise RuntimeError("waited for a result a killed job will never write")

    monkeypatch.setattr("submitit.core.core._time.sleep", no_wait)
    said, ended = _collect(job)
    assert waits == [], f"waited {len(waits)} time(s) for a result a killed job never writes"
    assert said == ["ended c: failed (killed: its job ended without a result)"], said
    assert ended == {"c": "failed"}
