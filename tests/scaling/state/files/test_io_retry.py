"""A study's state files are written through a transient I/O error (issue 55, case 11).

The study folder is made immutable for a moment (`chattr +i`: a read-only spell that holds for
root too); a write of `jobs.json` waits it out, saying so, instead of raising.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from scaling.state.files.io_retry import written
from scaling.state.files.job_records import JobRecord, read_records, write_records


def _immutable(folder: Path, on: bool) -> None:
    subprocess.run(["chattr", "+i" if on else "-i", str(folder)], check=True)


@pytest.fixture
def spell(tmp_path):
    """A folder read-only until the test lifts the spell (always lifted at the end)."""
    if shutil.which("chattr") is None:
        pytest.skip("needs chattr")
    folder = tmp_path / "study"
    folder.mkdir()
    try:
        _immutable(folder, True)
    except subprocess.CalledProcessError:
        pytest.skip("this file system has no immutable flag")
    try:
        yield folder
    finally:
        _immutable(folder, False)


def test_a_record_write_waits_out_a_read_only_spell(spell, capsys) -> None:
    lift = threading.Timer(1.0, _immutable, (spell, False))
    lift.start()
    try:
        record = JobRecord("c", "local", "123", 0.0)
        write_records(spell, {"c": record})  # raised OSError before (case 11)
    finally:
        lift.cancel()
    assert read_records(spell) == {"c": record}
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 2 and said[0].startswith(f"cannot write {spell / 'jobs.json'}"), said
    assert said[1].startswith(f"wrote {spell / 'jobs.json'} after"), said


def test_a_write_that_never_succeeds_raises_after_its_time(spell) -> None:
    said: list[str] = []
    with pytest.raises(OSError):
        written(lambda: (spell / "x").write_text("x"), spell / "x", said.append, give_up_s=0.1)
    assert len(said) == 1 and "trying again" in said[0], said
