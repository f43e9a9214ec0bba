"""A backend is its class: `scaling.state.scheduler` asks each backend's class
(`JobBackend.named`, the one lookup by name) which of its jobs are live and has it stop them;
nothing in `scaling/` branches on a backend's name or keeps a table keyed by one, and a
jobs.json naming a backend this version does not know is refused in one clear error. Nothing is
submitted."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import get_args, get_type_hints

import pytest

from scaling.backends.executors import LocalExecutor, SlurmExecutor
from scaling.spec.study import Study
from scaling.state import scheduler
from scaling.state.files.job_records import JobRecord, read_records, write_records
from scaling.state.scheduler import JobBackend, live_jobs

ROOT = Path(__file__).resolve().parents[3]
# a name that is not this project's backend: submitit's own SUBMITIT_EXECUTOR, read in a job
NOT_OURS = {"scaling/costs/pilot_job.py"}


def _names_in(node: ast.AST) -> list:
    """The string constants of `node` and of a tuple, list or set literal it is."""
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant)]


def test_no_module_branches_on_or_keys_by_a_backend_name():
    """`executor == "slurm"`, `!= "local"`, `in ("slurm", ...)` or `{"slurm": ...}` anywhere in
    scaling/: each is a capability or a method of the executor class instead."""
    names = set(JobBackend.known())
    found = []
    for path in sorted((ROOT / "scaling").rglob("*.py")):
        where = str(path.relative_to(ROOT))
        if where in NOT_OURS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if names & {n for side in sides for n in _names_in(side)}:
                    found.append(f"{where}:{node.lineno} compares a backend name")
            if isinstance(node, ast.Dict) and names & set(_names_in(ast.Tuple(node.keys))):
                found.append(f"{where}:{node.lineno} keys a table by backend name")
    assert found == [], "\n".join(found)


def test_the_spec_offers_the_backends_there_are():
    """The spec's `executor` choices are the backend classes' names (one list, checked)."""
    choices = get_args(get_type_hints(Study)["executor"])
    assert set(choices) == set(JobBackend.known()) == {LocalExecutor.name, SlurmExecutor.name}
    assert JobBackend.named("slurm") is SlurmExecutor  # the most derived: the whole executor
    assert JobBackend.named("local") is LocalExecutor


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
