"""`SCALING_POLL_S`: the wait between a driver's status polls (default 5 s; the suite runs at 1 s,
tests/conftest.py). A bad value is refused by `scaling run` in one line before the study is
read: nothing prepared, no folder made, nothing submitted."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from foundation.config import ConfigError
from scaling.rounds.watcher import POLL_ENV, POLL_S, poll_seconds
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
