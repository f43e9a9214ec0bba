"""`scaling cancel` of a local job whose controller ignores SIGINT (started from a background
shell, which sets SIGINT to SIG_IGN for everything it starts): the job still ends."""

from __future__ import annotations

import signal
import time

from foundation.process.proc import children
from scaling.backends.base import ESCALATE_S, cancel_jobs, live_jobs
from scaling.state.files.job_records import JobRecord
from tests.scaling.helpers import dead, poll


def _sleep_long() -> None:
    time.sleep(600)


def test_a_controller_that_ignores_sigint_is_killed_with_its_task(tmp_path):
    import submitit

    folder = tmp_path / "submitit"
    executor = submitit.LocalExecutor(folder=folder / "local")
    executor.update_parameters(timeout_min=20)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the controller inherits it
    try:
        job = executor.submit(_sleep_long)
    finally:
        signal.signal(signal.SIGINT, previous)
    controller = int(job.job_id)
    (task,) = poll(lambda: children(controller), 60, "the task")
    records = {"c": JobRecord("c", "local", job.job_id, time.time())}
    assert live_jobs(records, folder) == {"c": "RUNNING"}
    assert _ignores_sigint(controller)

    start = time.monotonic()
    assert cancel_jobs(records, folder) == ["c"]
    took = time.monotonic() - start
    assert live_jobs(records, folder) == {}
    assert job.done()  # the controller is gone (and reaped by its LocalJob)
    poll(lambda: dead(task), 10, "the task to be killed")
    assert took >= ESCALATE_S  # SIGINT did nothing; the escalation did it (a lower bound: load
    # can only lengthen it, never make it pass wrongly)


def _ignores_sigint(pid: int) -> bool:
    with open(f"/proc/{pid}/status") as status:
        (mask,) = [line.split()[1] for line in status if line.startswith("SigIgn:")]
    return bool(int(mask, 16) & (1 << (signal.SIGINT - 1)))
