"""sbatch's real refusals over a limit are waited out: no cell lost, none submitted twice.

The submitter is told limits looser than the cluster's (as when a site lowers them after they
were read), so the suite's real Slurm refuses: an array over `MaxArraySize` ("Invalid job array
specification"; the suite's cluster has 4), and where CI runs slurmdbd, more jobs than the
user's `MaxSubmitJobs` (`AssocMaxSubmitJobLimit`). The chunks are plain `sleep` arrays (no
training), so each test is a few seconds of Slurm scheduling.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass

import pytest

from scaling.backends.slurm.limits import SlurmLimits, read_limits
from scaling.backends.slurm.submit import ArraySubmitter, Group
from scaling.state.files.job_records import read_records
from tests.conftest import skip_unless_required
from tests.scaling.helpers import wait_for_an_empty_queue

pytestmark = pytest.mark.slurm


@dataclass(frozen=True)
class _Cell:
    cell_id: str


@dataclass(frozen=True)
class _Job:
    job_id: str


def _sleep_array(tmp_path, seconds: float):
    """A chunk submitter: one real sbatch array of `sleep`, its tasks as jobs; the exception
    carries sbatch's own stderr, as submitit's does."""
    calls: list[tuple[int, bool]] = []  # (cells, queued) of each sbatch

    def submit(cells, _params):
        spec = f"--array=0-{len(cells) - 1}" if len(cells) > 1 else "--array=0"
        proc = subprocess.run(
            ["sbatch", "--parsable", spec, "-o", "/dev/null", f"--chdir={tmp_path}"]
            + ["--wrap", f"sleep {seconds}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        calls.append((len(cells), proc.returncode == 0))
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr)
        array = proc.stdout.strip().split(";")[0]
        return [_Job(f"{array}_{i}") for i in range(len(cells))]

    return submit, calls


def _run(tmp_path, limits: SlurmLimits, num_cells: int, seconds: float):
    said: list[str] = []
    sleeps: list[float] = []
    submit, calls = _sleep_array(tmp_path, seconds)
    submitter = ArraySubmitter(tmp_path, "slurm", limits, submit, 0.5, said.append)
    submitter._sleep = lambda s: (sleeps.append(s), time.sleep(s))
    cells = [_Cell(f"c{i:02d}") for i in range(num_cells)]
    records: dict = {}
    submitted: dict = {}
    submitter.run([Group(cells, dict)], records, submitted)
    return said, sleeps, calls, records, submitted, submitter


def _each_cell_once(tmp_path, num_cells, records, submitted):
    assert sorted(submitted) == sorted(records) == [f"c{i:02d}" for i in range(num_cells)]
    job_ids = [r.job_id for r in records.values()]
    assert len(set(job_ids)) == num_cells  # one job each, never two
    assert read_records(tmp_path) == records  # as recorded in the study folder


def test_an_array_over_max_array_size_is_refused_then_split(tmp_path, slurm_cluster):
    real = read_limits()
    if real.max_array >= 1001:
        skip_unless_required("the cluster's MaxArraySize is Slurm's default; start.sh sets 4")
    loose = SlurmLimits(max_array=2 * real.max_array, cap=None)  # as if read before a change
    num = 2 * real.max_array
    said, _sleeps, calls, records, submitted, _ = _run(tmp_path, loose, num, 0)
    assert any("sbatch refused: Invalid job array specification" in line for line in said), said
    # refused whole, then halved to the cluster's size: nothing queued by the refused call
    assert calls[0] == (num, False)
    queued = [n for n, ok in calls if ok]
    assert sum(queued) == num and max(queued) <= real.max_array, calls
    _each_cell_once(tmp_path, num, records, submitted)


def test_a_submit_over_the_users_max_submit_jobs_is_waited_out(tmp_path, slurm_cluster):
    real = read_limits()
    if not real.accounting or real.cap is None or real.cap > 20:
        skip_unless_required(
            f"no user submit limit on this cluster ({real.describe()}); .ci/slurm/start.sh "
            "runs slurmdbd with MaxSubmitJobs 6"
        )
    # the submitter does not know the cap: sbatch's AssocMaxSubmitJobLimit stops it
    loose = SlurmLimits(max_array=real.max_array, cap=None)
    num = real.cap + 4
    said, sleeps, calls, records, submitted, _ = _run(tmp_path, loose, num, 3)
    refusals = [line for line in said if "sbatch refused: " in line]
    assert refusals and "MaxSubmit" in refusals[0], said
    # waited out with a doubling backoff, never a tight loop
    assert sleeps and all(s >= 1.0 for s in sleeps) and sleeps[:2] == [1.0, 2.0][: len(sleeps)]
    assert sum(n for n, ok in calls if ok) == num
    assert len(calls) <= len(sleeps) + num // real.max_array + 2  # one sbatch per try
    _each_cell_once(tmp_path, num, records, submitted)


def test_an_interrupt_while_cells_wait_leaves_them_held_and_the_queued_ones_recorded(
    tmp_path, slurm_cluster
):
    """Ctrl-C (or `scaling cancel`, which interrupts the waiting submit) while cells wait for
    room: the queued arrays keep their records, the others keep `queued-<pid>` records that
    `scaling.driver.submission` restores to what they were; nothing is queued twice."""
    import threading

    from scaling.backends.queued import QUEUED
    from scaling.backends.slurm.queue import WAITING, waiting_reason

    stop = threading.Event()
    said: list[str] = []
    reasons: list[str] = []

    def say(line: str) -> None:
        said.append(line)
        if "cell(s) wait:" in line:
            reasons.append(waiting_reason(tmp_path))  # what `status` says meanwhile
            stop.set()  # as the driver's Ctrl-C does

    wait_for_an_empty_queue()  # the cap counts every job of this user
    submit, calls = _sleep_array(tmp_path, 30)
    limits = SlurmLimits(max_array=4, cap=2, cap_reason="slurm.max_submitted 2")
    submitter = ArraySubmitter(tmp_path, "slurm", limits, submit, 0.5, say, stop)
    cells = [_Cell(f"c{i}") for i in range(5)]
    records: dict = {}
    submitted: dict = {}
    try:
        with pytest.raises(KeyboardInterrupt):
            submitter.run([Group(cells, dict)], records, submitted)
    finally:
        ids = [r.job_id for r in records.values() if not r.job_id.startswith(QUEUED)]
        subprocess.run(["scancel", *{i.split("_")[0] for i in ids}], timeout=30, check=False)
    assert sorted(submitted) == ["c0", "c1"] and calls == [(2, True)]
    assert all(records[c].job_id.startswith(QUEUED) for c in ("c2", "c3", "c4"))
    assert read_records(tmp_path) == records
    assert reasons == ["slurm.max_submitted 2"]  # `status` said why they waited
    assert not (tmp_path / WAITING).exists()  # none waits now
