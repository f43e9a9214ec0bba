"""Every write into a study's folder refuses to follow a symbolic link (issue 63, finding 4).

A link planted at `jobs.json`, at its old temporary name `.jobs.json.tmp`, at `.submit.lock`,
at a state file or at `analysis/report.md` and `verdict.json` once had its target truncated or
overwritten. Now the write is refused with one line naming the path and the fix (a ConfigError
for the state files, which the commands print as one `error:` line), and the target is left
byte for byte as it was."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from foundation.atomic import UnsafePath
from foundation.config import ConfigError
from scaling.driver.submission import _submit_lock
from scaling.state.files import cancel_mark, driver_lock, look_state, search_state
from scaling.state.files.job_records import JobRecord, write_records
from scaling.state.files.regular import BadStateFile

BYTES = b"a file of the user's, outside the study folder\n"


@pytest.fixture
def plant(tmp_path):
    """plant(name): a link at `study/name` to a file of the user's; returns that file."""
    folder = tmp_path / "study"
    folder.mkdir()

    def planted(name: str):
        target = tmp_path / f"precious-{name.strip('.').replace('/', '-')}"
        target.write_bytes(BYTES)
        link = folder / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)
        return target

    planted.folder = folder
    return planted


RECORDS = {"c1": JobRecord("c1", "local", "123", 0.0)}


def test_a_link_at_jobs_json_is_refused_and_its_target_kept(plant):
    target = plant("jobs.json")
    with pytest.raises(BadStateFile) as caught:
        write_records(plant.folder, RECORDS)
    assert str(caught.value).startswith(f"{plant.folder / 'jobs.json'}: a symbolic link to ")
    assert target.read_bytes() == BYTES


def test_a_link_at_the_old_temporary_name_of_jobs_json_is_not_written_through(plant):
    target = plant(".jobs.json.tmp")
    write_records(plant.folder, RECORDS)
    assert target.read_bytes() == BYTES
    assert "c1" in (plant.folder / "jobs.json").read_text()


def test_a_link_at_the_submit_lock_is_refused_not_truncated(plant):
    target = plant(".submit.lock")
    study = SimpleNamespace(folder=plant.folder, name="tiny")
    with pytest.raises(ConfigError, match=r"\.submit\.lock: a symbolic link"):
        with _submit_lock(study):
            pass
    assert target.read_bytes() == BYTES


@pytest.mark.parametrize(
    ("name", "write"),
    [
        ("lr_search.json", lambda f: search_state.write_state(f, search_state.SearchState())),
        ("looks.json", lambda f: look_state.write_looks(f, {"design": None, "looks": []})),
        ("cancelled.json", lambda f: cancel_mark.mark_cancelled(f, ["c1"])),
    ],
)
def test_a_link_at_a_state_file_is_refused_read_and_write(plant, name, write):
    target = plant(name)
    with pytest.raises(BadStateFile, match=f"{name}: a symbolic link"):
        write(plant.folder)
    assert target.read_bytes() == BYTES


def test_a_link_at_the_driver_lock_is_refused_and_left(plant):
    target = plant(driver_lock.LOCK_NAME)
    with pytest.raises(ConfigError, match="driver.pid: a symbolic link"):
        driver_lock.acquire(plant.folder)
    assert target.read_bytes() == BYTES and (plant.folder / driver_lock.LOCK_NAME).is_symlink()


@pytest.mark.parametrize("name", ["report.md", "verdict.json"])
def test_a_link_at_the_report_or_verdict_is_refused_not_overwritten(plant, name):
    from analysis.api import run_analysis
    from analysis.judgement import table_judgement
    from tests.analysis.stats.test_select import disagreeing_table

    target = plant(f"analysis/{name}")
    with pytest.raises(UnsafePath, match=f"{name}: a symbolic link"):
        run_analysis(
            disagreeing_table(), table_judgement("linear", num_resamples=0),
            plant.folder / "analysis",
        )  # fmt: skip
    assert target.read_bytes() == BYTES
