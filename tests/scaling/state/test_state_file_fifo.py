"""A FIFO where a cache or state file should be is never opened for reading (issue 63, finding
6): `scaling status` once blocked forever on a FIFO named `mlflow_runs.json`. The run cache
treats it as absent (and leaves it); a state file that must be trusted is one clear line.

A probe thread stands in for the writer the blocked reader waits for: it keeps trying to open
the FIFO's write end without blocking, which succeeds only while a reader holds it open. So a
reader that opened the FIFO is recorded (and let go with an end of file), never left hanging.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from types import SimpleNamespace

import pytest

from foundation.config import ConfigError
from scaling.state import run_cache
from scaling.state.files import driver_lock, job_records, look_state, search_state


@contextlib.contextmanager
def fifo_probe(path):
    """A FIFO at `path`; yields the list of times a reader opened it (to be empty)."""
    os.mkfifo(path)
    opened: list[bool] = []
    stop = threading.Event()

    def probe() -> None:
        while not stop.is_set():
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as err:
                if err.errno not in (errno.ENXIO, errno.ENOENT):
                    raise
                stop.wait(0.005)
                continue
            opened.append(True)
            os.close(fd)  # the reader sees an end of file

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    try:
        yield opened
    finally:
        stop.set()
        thread.join()


def test_a_fifo_named_like_the_run_cache_is_absent_and_left(tmp_path):
    study = SimpleNamespace(
        folder=tmp_path, name="tiny", cells=[], mlflow=SimpleNamespace(tracking_uri="x")
    )
    searched: list[str] = []
    with fifo_probe(tmp_path / run_cache.CACHE_NAME) as opened:
        runs = run_cache.poll_runs(study, "1", lambda f: searched.append(f) or [])
    assert opened == [] and runs == {}
    assert len(searched) == 1  # no cache: the full search
    assert (tmp_path / run_cache.CACHE_NAME).is_fifo()  # not replaced


@pytest.mark.parametrize(
    ("name", "read"),
    [
        (job_records.RECORDS, job_records.read_records),
        (search_state.STATE_FILE, search_state.read_state),
        (look_state.LOOKS_FILE, look_state.read_looks),
        (driver_lock.LOCK_NAME, driver_lock.acquire),
    ],
)
def test_a_fifo_named_like_a_state_file_is_one_clear_line(tmp_path, name, read):
    with fifo_probe(tmp_path / name) as opened, pytest.raises(ConfigError) as caught:
        read(tmp_path)
    assert opened == []
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / name}: a named pipe (FIFO), not a regular file")
    assert "\n" not in message and ("remove it" in message or "delete it" in message)
