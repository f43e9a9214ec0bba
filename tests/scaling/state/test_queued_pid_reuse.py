"""A `queued-` record names one process, not a pid: pids are reused (pid_max 32768), and a
record whose pid now belongs to another process is neither live nor signalled by `cancel`
(`scaling.backends.queued`, the start time in /proc/<pid>/stat)."""

from __future__ import annotations

import signal
import subprocess

import pytest

from scaling.backends.base import live_jobs
from scaling.backends.local.executor import LocalExecutor
from scaling.backends.queued import QUEUED, queued_id
from scaling.state.files.job_records import JobRecord


@pytest.fixture
def other_process():
    proc = subprocess.Popen(["sleep", "30"])
    yield proc
    proc.kill()
    proc.wait()


def test_a_pid_taken_by_another_process_is_not_live_nor_signalled(tmp_path, other_process):
    pid = other_process.pid
    start = queued_id(pid).rsplit("-", 1)[1]
    stale = f"{QUEUED}{pid}-{int(start) - 1}"  # the submit that wrote it started earlier
    legacy = f"{QUEUED}{pid}"  # a record from before start times: `sleep` is no `scaling`
    for job_id in (legacy, stale):
        records = {"c1": JobRecord("c1", "local", job_id, 0.0)}
        assert live_jobs(records, tmp_path) == {}, job_id
        LocalExecutor.stop(records)
        LocalExecutor.kill(records)
        with pytest.raises(subprocess.TimeoutExpired):  # the sleep was not interrupted
            other_process.wait(timeout=0.5)

    # the same process, recorded as the project records it, is live and is stopped
    records = {"c1": JobRecord("c1", "local", queued_id(pid), 0.0)}
    assert live_jobs(records, tmp_path) == {"c1": "PENDING"}
    LocalExecutor.stop(records)
    assert other_process.wait(timeout=10) == -signal.SIGINT
