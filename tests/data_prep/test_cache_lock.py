"""The index-cache lock where the file system refuses flock (Lustre mounted `noflock`)."""

from __future__ import annotations

import errno
import fcntl
import threading
import time

import pytest

from data_prep import access


def _refuse_flock(code: int):
    def flock(handle, operation):
        raise OSError(code, "simulated")

    return flock


@pytest.mark.parametrize("code", [errno.ENOSYS, errno.EOPNOTSUPP])
def test_refused_flock_falls_back_to_a_directory_lock(tmp_path, monkeypatch, capsys, code):
    monkeypatch.setattr(fcntl, "flock", _refuse_flock(code))
    held = threading.Event()
    order: list[str] = []

    def second() -> None:
        held.wait()
        with access._cache_lock(tmp_path):  # waits for the first holder's directory
            order.append("second")

    thread = threading.Thread(target=second)
    thread.start()
    with access._cache_lock(tmp_path):
        assert (tmp_path / ".lock.d").is_dir()
        held.set()
        time.sleep(0.8)  # the second caller polls every 0.5 s and must still be waiting
        order.append("first")
    thread.join(timeout=10)
    assert order == ["first", "second"]
    assert not (tmp_path / ".lock.d").exists()
    assert "does not support it" in capsys.readouterr().out


def test_a_stale_directory_lock_names_its_fix(tmp_path):
    (tmp_path / ".lock.d").mkdir()
    with pytest.raises(TimeoutError, match="remove .*lock.d and resubmit"):
        with access._mkdir_lock(tmp_path / ".lock.d", wait_s=0.2):
            pass


def test_other_flock_errors_are_not_hidden(tmp_path, monkeypatch):
    monkeypatch.setattr(fcntl, "flock", _refuse_flock(errno.EBADF))
    with pytest.raises(OSError, match="simulated"):
        with access._cache_lock(tmp_path):
            pass
