"""One study, one driver (issue 39, D9): a second `scaling submit` of a study that a live
process drives refuses at once naming its pid; a lock left by a killed driver is taken over."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import yaml
from typer.testing import CliRunner

from scaling.cli import app
from scaling.records.driver_lock import LOCK_NAME, acquire, release
from tests.scaling.conftest import one_size_spec


@pytest.mark.slow  # ~15-30 s: a real first driver starts and trains
def test_a_second_driver_refuses_at_once_naming_the_first(tmp_path, data_dir) -> None:
    spec = one_size_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path / 'm.db'}", 400)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    lock = tmp_path / "study" / LOCK_NAME
    log = open(tmp_path / "first.log", "wb")  # noqa: SIM115 - closed below
    first = subprocess.Popen(
        [sys.executable, "-m", "scaling", "submit", str(path)],
        cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (lock.exists() and lock.read_text().strip()):
            assert first.poll() is None, (tmp_path / "first.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the first driver never took the lock"
            time.sleep(0.05)
        start = time.monotonic()
        second = CliRunner().invoke(app, ["submit", str(path)])
        seconds = time.monotonic() - start
    finally:
        os.killpg(first.pid, signal.SIGINT)  # the first stops its cells and exits 130
        first.wait(timeout=120)
        log.close()
    assert second.exit_code == 2, second.output
    errors = [line for line in second.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"already driven by pid {first.pid}" in errors[0], second.output
    assert "started" not in second.output and seconds < 10, second.output  # at once, no cell
    assert not lock.exists()  # the first removed its lock on the way out


def test_a_lock_left_by_a_dead_driver_is_taken_over(tmp_path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / LOCK_NAME).write_text(f"{dead.pid}\n")
    path = acquire(tmp_path)
    assert path.read_text().strip() == str(os.getpid())
    release(path)
    assert not path.exists()
