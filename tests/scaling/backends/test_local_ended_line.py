"""A local cell whose job raised (its variant's file edited mid-study so that it no longer
imports) is said `failed`, with the error, not submitit's `FINISHED` (issue 54)."""

from __future__ import annotations

import time

import submitit

from scaling.backends.local_jobs import DeviceSlots, LocalRound


def _import_a_broken_file() -> None:
    import no_such_module_of_the_users  # noqa: F401 - the failure under test


def test_a_job_that_raised_ends_failed_with_its_error_not_finished(tmp_path):
    executor = submitit.LocalExecutor(folder=tmp_path)
    executor.update_parameters(timeout_min=1)
    job = executor.submit(_import_a_broken_file)
    while not job.done():
        time.sleep(0.2)
    assert job.state == "FINISHED"  # submitit's word for a job whose function raised
    said: list[str] = []
    round_ = object.__new__(LocalRound)  # only what collecting an ended job reads
    round_.running, round_.held, round_.finished, round_.ended = {"c": job}, {}, {}, {}
    round_.devices, round_.say = DeviceSlots([]), said.append
    round_._collect_ended()
    assert said == [
        "ended c: failed (ModuleNotFoundError: No module named 'no_such_module_of_the_users')"
    ], said
    assert round_.ended == {"c": "failed"}
