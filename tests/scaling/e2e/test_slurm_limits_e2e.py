"""A study larger than the cluster's limits, on the suite's real Slurm: arrays split at
`MaxArraySize` (the suite's cluster runs with 4, `.ci/slurm/common.sh`), at most the cap of the
user's jobs queued at once (the user's `MaxSubmitJobs` where CI runs slurmdbd, else the study's
`slurm.max_submitted`), the rest held and submitted as jobs leave the queue, each cell trained
once with one MLflow run.

Slow (about a minute on 2 cores): 12 real one-rank cells through Slurm; the split, the held
cells and their submission as the queue drains happen only in a study larger than the limits.
Without the split (one array per world size) sbatch refuses the 12-cell array, which fails the
test at once (tried on a copy).
"""

from __future__ import annotations

import subprocess
from collections import Counter

import pytest

from foundation import contract
from scaling.backends.queued import QUEUED
from scaling.backends.slurm.executor import SlurmExecutor
from scaling.backends.slurm.limits import read_limits
from scaling.backends.slurm.queue import WAITING
from scaling.driver.round_driver import StudyRun
from scaling.state.files.job_records import read_records
from scaling.state.status import study_status
from tests.conftest import skip_unless_required
from tests.scaling.conftest import one_size_spec
from tests.scaling.helpers import study_runs, wait_for_an_empty_queue, write_and_load

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
CAP = 6


def test_a_study_over_the_limits_runs_each_cell_once(
    tmp_path, data_dir, mlflow_server, slurm_cluster
):
    limits = read_limits()
    if limits.max_array >= 12:
        skip_unless_required(
            f"the cluster's MaxArraySize is {limits.max_array}; .ci/slurm/start.sh sets 4"
        )
    seeds = list(range(6))  # 2 arms x 6 seeds = 12 one-rank cells, 3x the array size
    slurm = {"time_limit_min": 20, "array_parallelism": 4}
    if limits.cap is None or limits.cap > CAP:  # no slurmdbd: the study's own cap
        slurm["max_submitted"] = CAP
    spec = one_size_spec(
        data_dir, tmp_path / "study", mlflow_server, 2, seeds=seeds, executor="slurm", slurm=slurm
    )
    study = write_and_load(spec, tmp_path / "study.yaml")
    wait_for_an_empty_queue()  # the cap counts every job of this user
    said: list[str] = []

    def say(line: str) -> None:
        said.append(line)
        assert "sbatch refused" not in line, line  # within the limits: never refused

    executor = SlurmExecutor(study)
    held_rows: list = []
    submit_array = executor._submit_array
    sizes: list[int] = []

    def watched_submit(group, params):
        sizes.append(len(group))
        if len(sizes) == 3:  # after the first cap's worth: the rest wait, shown as such
            held_rows.extend(r for r in study_status(study) if r.job_id.startswith(QUEUED))
        return submit_array(group, params)

    executor._submit_array = watched_submit
    driver = StudyRun(study, executor, say=say, poll_s=1.0)
    rows = driver.drive()
    driver.finish(rows)

    assert [r.state for r in rows] == [contract.COMPLETED] * 12, rows
    assert max(sizes) <= limits.max_array and sum(sizes) == 12, sizes
    # at most CAP queued at once: the first pass filled the cap, the rest waited
    assert sum(sizes[:2]) == CAP and len(sizes) >= 3, sizes
    waits = [line for line in said if "cell(s) wait:" in line]
    assert waits and ("MaxSubmit" in waits[0] or f"slurm.max_submitted {CAP}" in waits[0]), said
    assert held_rows and all(r.state == contract.QUEUED for r in held_rows)
    assert all(r.note.startswith("waiting: ") for r in held_rows), held_rows
    assert not (study.folder / WAITING).exists()

    # every cell trained once: one job each, one MLflow run each, one parent
    records = read_records(study.folder)
    assert len({r.job_id for r in records.values()}) == 12
    assert all(not r.job_id.startswith(QUEUED) and r.failures == 0 for r in records.values())
    runs = study_runs(study)
    cells = Counter(r.data.tags.get("cell_id") for r in runs if r.data.tags.get("cell_id"))
    assert sorted(cells) == sorted(c.cell_id for c in study.cells) and set(cells.values()) == {1}
    assert len(runs) == 13
    arrays = {r.job_id.split("_")[0] for r in records.values()}
    assert len(arrays) == len(sizes)


def test_sbatch_refuses_an_array_over_max_array_size_in_words_the_submit_waits_out(slurm_cluster):
    """The words `limit_refusal` reads are sbatch's own, from the real cluster."""
    from scaling.backends.slurm.limits import ARRAY_REFUSAL, limit_refusal

    limits = read_limits()
    if limits.max_array >= 1001:
        skip_unless_required("the cluster's MaxArraySize is Slurm's default; start.sh sets 4")
    proc = subprocess.run(
        ["sbatch", f"--array=0-{limits.max_array}", "-o", "/dev/null", "--wrap", "true"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode != 0
    assert limit_refusal(proc.stderr) == ARRAY_REFUSAL, proc.stderr


def test_plan_says_how_many_arrays_the_first_round_becomes(
    tmp_path, data_dir, slurm_cluster, monkeypatch
):
    """Marked slow with the module, but cheap (one `scaling plan`, a few seconds)."""
    from typer.testing import CliRunner

    from scaling.cli import app

    if read_limits().max_array != 4:
        skip_unless_required("the cluster's MaxArraySize is not the 4 .ci/slurm/start.sh sets")
    spec = one_size_spec(
        data_dir,
        tmp_path / "study",
        f"sqlite:///{tmp_path}/m.db",
        2,
        seeds=list(range(6)),
        executor="slurm",
        slurm={"max_submitted": CAP},
    )
    path = tmp_path / "study.yaml"
    write_and_load(spec, path)
    out = CliRunner().invoke(app, ["plan", str(path)]).output
    assert "the first round's 12 cells become 3 job array(s) (MaxArraySize 4" in out, out
    assert "; 6 wait in `scaling submit`" in out, out
