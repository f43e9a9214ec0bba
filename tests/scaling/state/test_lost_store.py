"""A study's SQLite store deleted, emptied or left half-made (issue 39, D8): `scaling status`,
`submit`, `run` and `analyze` stop with one line naming the file and the fix, before anything
is submitted, and leave the file as it was; the fix (`--new-store`) moves a broken file aside
and says where. Real MLflow stores (one made per module, copied), real CLI commands."""

from __future__ import annotations

import shutil
import sqlite3

import pytest
import yaml
from typer.testing import CliRunner

from foundation import contract as C
from foundation.contract import make_client
from foundation.sqlite_store import head_revision, schema_problem
from scaling.cli import app
from scaling.driver.environment import load_study_spec
from scaling.state.mlflow_state import end_parent_run, ensure_parent_run, fail_cell_run
from scaling.state.store_check import MARKER, StoreWatch, adopt_new_store, store_trouble
from tests.scaling.conftest import one_size_spec

# ~24 s on 2 busy cores, ~20 s of it the module's store (MLflow creates its schema once)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def whole_store(tmp_path_factory):
    """A store with MLflow's whole schema, made once and copied by each test."""
    store = tmp_path_factory.mktemp("whole") / "mlflow.db"
    make_client(f"sqlite:///{store}").search_experiments(max_results=1)
    assert store.stat().st_size and schema_problem(store) is None
    return store


def _study(tmp_path, data_dir, whole_store):
    """A study that has submitted into its store (its parent run and the marker exist)."""
    store = tmp_path / "mlflow.db"
    shutil.copy(whole_store, store)
    spec = one_size_spec(data_dir, tmp_path / "study", f"sqlite:///{store}", 6)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = load_study_spec(path, check_environment=False)
    ensure_parent_run(study)
    assert (study.folder / MARKER).is_file()
    return path, study, store


def _half_make(store) -> None:
    """What a migration killed midway leaves: an older revision recorded, no experiment."""
    with sqlite3.connect(store) as db:
        db.execute("update alembic_version set version_num = '0584bdc529eb'")
        db.execute("delete from experiments")


DAMAGE = {
    "gone": lambda store: store.unlink(),
    "empty": lambda store: store.write_bytes(b""),
    "half-made": _half_make,
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_lost_or_broken_store_stops_every_command_in_one_line(
    tmp_path, data_dir, whole_store, damage
):
    path, study, store = _study(tmp_path, data_dir, whole_store)
    DAMAGE[damage](store)
    before = store.read_bytes() if store.exists() else None
    for command in ("status", "submit", "run", "analyze"):
        result = CliRunner().invoke(app, [command, str(path)])
        out = result.output
        assert result.exit_code == 2, (command, out)
        errors = [line for line in out.splitlines() if line.strip()]
        assert len(errors) == 1 and errors[0].startswith("error: "), (command, out)
        assert f"the MLflow store {store} " in errors[0] and "--new-store" in errors[0], out
        assert "Traceback" not in out and "retrying" not in out, out
        # nothing submitted, and the file exactly as it was (gone stays gone)
        assert not (study.folder / "cells").exists(), command
        assert (store.read_bytes() if store.exists() else None) == before, command
    if damage == "half-made":
        assert "half-made: schema revision 0584bdc529eb" in errors[0]
        assert f"not {head_revision()}" in errors[0]


def test_the_fix_moves_a_broken_store_aside_and_says_where(tmp_path, data_dir, whole_store):
    path, study, store = _study(tmp_path, data_dir, whole_store)
    _half_make(store)
    content = store.read_bytes()
    said: list[str] = []
    adopt_new_store(study, said.append)
    (aside,) = tmp_path.glob("mlflow.db.broken-*")
    assert aside.read_bytes() == content and not store.exists()  # moved, never deleted
    assert said[0] == f"moved the broken MLflow store {store} aside to {aside}", said
    uri, experiment = study.mlflow.tracking_uri, study.mlflow.experiment
    assert store_trouble(uri, experiment, study.folder) is None  # the next submit may go on


def test_an_unused_empty_store_is_a_new_store_not_a_lost_one(tmp_path):
    """An empty file no study logged into is what SQLite makes on first open: no error."""
    store = tmp_path / "mlflow.db"
    store.touch()
    assert store_trouble(f"sqlite:///{store}", "e", tmp_path / "study") is None


def test_the_driver_notices_the_store_vanish_or_be_replaced(tmp_path, data_dir, whole_store):
    _path, study, store = _study(tmp_path, data_dir, whole_store)
    watch = StoreWatch(study)
    watch.check()  # the same file: nothing to say
    store.rename(tmp_path / "elsewhere.db")
    with pytest.raises(ValueError, match="vanished while the study ran"):
        watch.check()
    shutil.copy(whole_store, store)  # a new file where the store was (a job made one)
    with pytest.raises(ValueError, match="was replaced by another file while the study ran"):
        watch.check()


def test_a_run_is_not_ended_in_a_lost_store(tmp_path, data_dir, whole_store, caplog):
    """The driver ending the parent FAILED as it stops on a lost store writes nothing: no new
    store file, no MLflow database traceback logged above the one line."""
    _path, study, store = _study(tmp_path, data_dir, whole_store)
    out = tmp_path / "study" / "cells" / study.cells[0].cell_id
    out.mkdir(parents=True)
    (out / C.RUN_ID_FILE).write_text("0" * 32)  # a run the lost store held
    store.unlink()
    end_parent_run(study, "FAILED")
    fail_cell_run(study, study.cells[0], "why")
    assert not store.exists() and "Traceback" not in caplog.text, caplog.text


def test_a_writer_killed_mid_transaction_leaves_a_store_that_still_reads_whole(
    tmp_path, data_dir, whole_store
):
    """`scaling run` killed while its SQLite store was mid-write leaves a hot journal; a
    read-only check could not roll it back ("attempt to write a readonly database") and called
    the whole store broken. The journal is rolled back instead: the committed runs are read."""
    path, study, store = _study(tmp_path, data_dir, whole_store)
    killed = (
        "import os, sqlite3\n"
        f"db = sqlite3.connect({str(store)!r}, isolation_level=None)\n"
        "db.execute('pragma cache_size = 1')\n"  # spill: the journal and the file both written
        "db.execute('begin')\n"
        "db.execute(\"update experiments set name = name || '-dead'\")\n"
        "db.execute('create table filler(x)')\n"
        "[db.execute('insert into filler values (?)', (i,)) for i in range(20000)]\n"
        "os.kill(os.getpid(), 9)\n"
    )
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", killed], check=False, timeout=120)
    assert store.with_name(store.name + "-journal").stat().st_size  # a hot journal
    assert schema_problem(store) is None
    assert load_study_spec(path).name == study.name  # the environment check reads it whole
    with sqlite3.connect(f"{store.absolute().as_uri()}?mode=ro", uri=True) as db:
        tables = {row[0] for row in db.execute("select name from sqlite_master")}
        names = {row[0] for row in db.execute("select name from experiments")}
    assert "filler" not in tables and not any(n.endswith("-dead") for n in names)
