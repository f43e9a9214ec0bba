"""Backends own their jobs: `scaling.state.scheduler` asks each backend's object
(`scheduler.BACKENDS`) which of its jobs are live and has it stop them; nothing there branches
on a backend's name, and a jobs.json naming a backend this version does not know is refused in
one clear error. Nothing is submitted."""

from __future__ import annotations

import ast
import inspect

import pytest

from scaling.records.job_records import JobRecord, read_records, write_records
from scaling.rounds.backends.executors import LocalExecutor, SlurmExecutor
from scaling.state import scheduler
from scaling.state.scheduler import live_jobs


def test_nothing_in_the_scheduler_compares_a_backend_name():
    names = {LocalExecutor.name, SlurmExecutor.name}
    tree = ast.parse(inspect.getsource(scheduler))
    compared = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare)
        and any(
            isinstance(c, ast.Constant) and c.value in names for c in [node.left, *node.comparators]
        )
    ]
    assert compared == [], f"scheduler.py branches on a backend name at lines {compared}"


def test_a_record_of_an_unknown_backend_is_one_clear_error(tmp_path):
    write_records(tmp_path, {"c1": JobRecord("c1", "pbs", "77", 0.0)})
    with pytest.raises(ValueError) as err:
        live_jobs(read_records(tmp_path), tmp_path / "submitit")
    said = str(err.value)
    assert "jobs.json" in said and "c1" in said and "'pbs'" in said and "slurm, local" in said


def test_a_local_job_whose_controller_is_gone_is_not_live(tmp_path):
    records = {"c1": JobRecord("c1", "local", "999999999", 0.0)}  # no such pid
    assert live_jobs(records, tmp_path / "submitit") == {}
