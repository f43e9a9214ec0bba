"""`SCALING_POLL_S`: the wait between a driver's status polls (default 5 s; the suite runs at 1 s,
tests/conftest.py). A bad value is refused by `scaling run` in one line before the study is
read: nothing prepared, no folder made, nothing submitted."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from foundation.config import ConfigError
from scaling.driver.watcher import POLL_ENV, POLL_S, poll_seconds
from tests.scaling.helpers import assert_one_error_line
from tests.shipped import shipped_study


def test_the_default_and_a_setting(monkeypatch):
    monkeypatch.delenv(POLL_ENV, raising=False)
    assert poll_seconds() == POLL_S == 5.0
    monkeypatch.setenv(POLL_ENV, " 0.5 ")
    assert poll_seconds() == 0.5


@pytest.mark.parametrize("raw", ["abc", "0", "-1", "nan", "inf"])
def test_a_bad_setting_names_the_variable_and_its_default(monkeypatch, raw):
    monkeypatch.setenv(POLL_ENV, raw)
    with pytest.raises(ConfigError, match=rf"SCALING_POLL_S='{raw}'.*\(default 5\)"):
        poll_seconds()


def test_scaling_run_refuses_it_before_reading_the_study(tmp_path):
    path = shipped_study("demo", tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "scaling", "run", str(path)],
        cwd=tmp_path,
        env={**os.environ, POLL_ENV: "soon"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = assert_one_error_line(proc, "Traceback", "error: SCALING_POLL_S='soon'")
    assert "unset it" in line
    assert not (tmp_path / "runs").exists() and not (tmp_path / "data").exists()


def test_slurm_drivers_poll_once_a_minute_unless_told(monkeypatch, tmp_path):
    """A site's slurmctld answers every user: a Slurm driver polls every 60 s by default, a
    local one every 5 s; `SCALING_POLL_S` sets both."""
    from scaling.backends.local.executor import LocalExecutor
    from scaling.backends.slurm.executor import SlurmExecutor

    monkeypatch.delenv(POLL_ENV, raising=False)
    assert poll_seconds(SlurmExecutor.default_poll_s) == 60.0
    assert poll_seconds(LocalExecutor.default_poll_s) == 5.0
    monkeypatch.setenv(POLL_ENV, "2")
    assert poll_seconds(SlurmExecutor.default_poll_s) == 2.0


def test_a_refusing_slurmctld_is_left_alone_for_a_while(monkeypatch, tmp_path):
    """squeue failing (here: no cluster at all, so it times out) is not asked again at once:
    the next poll gets the same error without a call, and says for how long slurmctld is left
    alone."""
    from scaling.backends.slurm import queue

    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "no-cluster.conf"))
    monkeypatch.setattr(queue, "SQUEUE_TIMEOUT_S", 2.0)  # it hangs looking for a cluster
    backoff = queue.squeue_backoff()
    with pytest.raises(RuntimeError):
        queue.squeue_states(["7_0"])
    assert backoff.calls == 1 and backoff.wait == queue.BACKOFF_FIRST_S
    with pytest.raises(RuntimeError, match=r"left alone for \d+ s more"):
        queue.squeue_states(["7_0", "7_1"])
    assert backoff.calls == 1  # not asked again
