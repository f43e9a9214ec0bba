"""A backend is its class: `scaling.backends.base` asks each backend's class (`backend_class`,
the one lookup by name in the registry `BACKENDS`) which of its jobs are live and has it stop
them; nothing in `scaling/` branches on a backend's name or keeps another table keyed by one, and
a jobs.json naming a backend this version does not know is refused in one clear error. Nothing
is submitted."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args, get_type_hints

import pytest

from scaling.backends.base import BACKEND_NAMES, BACKENDS, backend_class, live_jobs
from scaling.backends.local.executor import LocalExecutor
from scaling.backends.slurm.executor import SlurmExecutor
from scaling.spec.study import StudySpec
from scaling.state.files.job_records import JobRecord, read_records, write_records

ROOT = Path(__file__).resolve().parents[3]
REGISTRY = ROOT / "scaling" / "backends" / "base.py"  # the one table keyed by a backend's name


def _names_in(node: ast.AST) -> list:
    """The string constants of `node` and of a tuple, list or set literal it is."""
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant)]


def test_no_module_branches_on_or_keys_by_a_backend_name():
    """`executor == "slurm"`, `!= "local"`, `in ("slurm", ...)` or `{"slurm": ...}` anywhere in
    scaling/: each is a capability or a method of the backend's class instead."""
    names = set(BACKEND_NAMES)
    found = []
    for path in sorted((ROOT / "scaling").rglob("*.py")):
        where = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if names & {n for side in sides for n in _names_in(side)}:
                    found.append(f"{where}:{node.lineno} compares a backend name")
            if isinstance(node, ast.Dict) and names & set(_names_in(ast.Tuple(node.keys))):
                if path != REGISTRY:
                    found.append(f"{where}:{node.lineno} keys a table by backend name")
    assert found == [], "\n".join(found)


def test_the_spec_offers_the_backends_there_are():
    """The spec's `executor` choices are the registry's names, each the name of its class (set
    once, in the class)."""
    choices = get_args(get_type_hints(StudySpec)["executor"])
    assert choices == BACKEND_NAMES == tuple(BACKENDS) == (LocalExecutor.name, SlurmExecutor.name)
    assert backend_class("slurm") is SlurmExecutor
    assert backend_class("local") is LocalExecutor
    for name in BACKEND_NAMES:
        assert backend_class(name).name == name


def test_a_record_of_an_unknown_backend_is_one_clear_error(tmp_path):
    write_records(tmp_path, {"c1": JobRecord("c1", "pbs", "77", 0.0)})
    with pytest.raises(ValueError) as err:
        live_jobs(read_records(tmp_path), tmp_path / "submitit")
    said = str(err.value)
    assert "jobs.json" in said and "c1" in said and "'pbs'" in said and "local, slurm" in said


def test_a_local_job_whose_controller_is_gone_is_not_live(tmp_path):
    records = {"c1": JobRecord("c1", "local", "999999999", 0.0)}  # no such pid
    assert live_jobs(records, tmp_path / "submitit") == {}
