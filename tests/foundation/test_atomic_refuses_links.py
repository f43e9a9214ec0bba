"""`foundation.atomic` never writes through a link, nor reads or replaces anything but a regular
file (issue 63): a link, a directory or a FIFO where a file should be is `UnsafePath`, one line
naming the path and the fix, and what it points at is left byte for byte as it was."""

from __future__ import annotations

import fcntl
import os

import pytest

from foundation import atomic

BYTES = b"the user's own file\n"


def _planted(tmp_path, name: str):
    """`tmp_path/name`, a link to a file of the user's; (the link, the user's file)."""
    target = tmp_path / "elsewhere" / "precious.txt"
    target.parent.mkdir()
    target.write_bytes(BYTES)
    link = tmp_path / name
    link.symlink_to(target)
    return link, target


def test_a_link_at_the_destination_is_refused_and_its_target_kept(tmp_path):
    link, target = _planted(tmp_path, "state.json")
    with pytest.raises(atomic.UnsafePath) as caught:
        atomic.write_text(link, "{}")
    message = str(caught.value)
    assert message.startswith(f"{link}: a symbolic link to {target}, not a regular file")
    assert "remove it" in message and "\n" not in message
    assert target.read_bytes() == BYTES and link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "state.json"]  # no temp


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_directory_or_fifo_at_the_destination_is_refused(tmp_path, kind):
    path = tmp_path / "state.json"
    if kind == "directory":
        path.mkdir()
        (path / "inside").write_bytes(BYTES)
    else:
        os.mkfifo(path)
    with pytest.raises(atomic.UnsafePath, match="not a regular file"):
        atomic.write_text(path, "{}")
    with pytest.raises(atomic.UnsafePath, match="not a regular file"):
        atomic.read_text(path)
    assert path.is_dir() if kind == "directory" else path.is_fifo()


def test_a_link_planted_at_a_temporary_name_is_not_written_through(tmp_path, monkeypatch):
    """The temporary file is made with O_EXCL | O_NOFOLLOW: a link at its name is refused."""
    link, target = _planted(tmp_path, ".state.json.1.feed.tmp")
    monkeypatch.setattr(os, "getpid", lambda: 1)
    monkeypatch.setattr(atomic.secrets, "token_hex", lambda _n: "feed")
    with pytest.raises(atomic.UnsafePath):
        atomic.write_text(tmp_path / "state.json", "{}")
    assert target.read_bytes() == BYTES and not (tmp_path / "state.json").exists()


def test_reads_are_of_regular_files_only(tmp_path):
    link, target = _planted(tmp_path, "state.json")
    with pytest.raises(atomic.UnsafePath, match="a symbolic link"):
        atomic.read_bytes(link)
    assert atomic.read_bytes(tmp_path / "absent.json") is None
    assert atomic.read_bytes(target) == BYTES


def test_a_lock_file_is_neither_truncated_nor_opened_through_a_link(tmp_path):
    link, target = _planted(tmp_path, ".submit.lock")
    with pytest.raises(atomic.UnsafePath, match="a symbolic link"):
        with atomic.open_lock(link):
            pass
    assert target.read_bytes() == BYTES
    lock = tmp_path / "own.lock"
    lock.write_bytes(BYTES)
    with atomic.open_lock(lock) as handle:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert lock.read_bytes() == BYTES  # opened to lock, not truncated


def test_a_regular_file_is_replaced_as_before(tmp_path):
    path = tmp_path / "state.json"
    atomic.write_text(path, "one")
    atomic.write_text(path, "two")
    assert atomic.read_text(path) == "two" and [p.name for p in tmp_path.iterdir()] == [path.name]
