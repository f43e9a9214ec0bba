"""`scaling analyze` and `scaling status` when the tracking server fails a read for good
(issue 63, round four): one `error:` line naming the server (its login masked) and the fault,
exit 4 (`EXIT_TRACKING_FAULT`: no verdict was judged), no traceback, nothing written; a bad
`MLFLOW_HTTP_REQUEST_TIMEOUT` is one line naming it, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from scaling.cli.terminal import EXIT_TRACKING_FAULT
from tests.foundation.fake_tracking import FakeTracking, Script, make_run
from tests.scaling.conftest import one_size_spec

PASSWORD = "pw-NEVER-PRINTED-63"


@pytest.fixture
def fake():
    server = FakeTracking()
    yield server
    server.close()


def _scaling(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_TRACKING_")}
    return subprocess.run(
        [sys.executable, "-m", "scaling", *args],
        cwd=cwd,
        env={**clean, "OMP_NUM_THREADS": "1", "SCALING_TRACKING_BACKOFF_S": "0", **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _one_error_line(proc: subprocess.CompletedProcess, code: int) -> str:
    out = proc.stdout + proc.stderr
    assert proc.returncode == code, out
    assert "Traceback" not in out and PASSWORD not in out, out
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("error: "), out
    return errors[0]


def test_analyze_against_a_failing_server_is_one_line_and_writes_nothing(fake, tmp_path):
    fake.script = Script(
        runs=[make_run(0)], only="runs/search", faults=dict.fromkeys(range(20), ("cut_json",))
    )
    uri = fake.uri.replace("http://", f"http://alice:{PASSWORD}@")
    out = tmp_path / "report"
    proc = _scaling(
        "analyze", "--tracking-uri", uri, "--experiment", "e", "--study-name", "s",
        "--out", str(out), cwd=tmp_path,
    )  # fmt: skip
    error = _one_error_line(proc, EXIT_TRACKING_FAULT)
    assert "***@127.0.0.1" in error and "runs/search" in error and "not JSON" in error, error
    assert "inconclusive" not in proc.stdout + proc.stderr
    assert not out.exists()


def _study(tmp_path: Path, data_dir: Path, uri: str) -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(one_size_spec(data_dir, tmp_path / "out", uri, steps=6)))
    return path


def test_status_against_a_failing_server_is_one_line(fake, tmp_path, data_dir):
    fake.script = Script(only="runs/search", faults=dict.fromkeys(range(20), ("status", 500)))
    path = _study(tmp_path, data_dir, fake.uri)
    error = _one_error_line(_scaling("status", str(path), cwd=tmp_path), EXIT_TRACKING_FAULT)
    assert fake.uri in error and "HTTP 500" in error, error


def test_status_with_a_bad_request_timeout_names_the_variable(fake, tmp_path, data_dir):
    path = _study(tmp_path, data_dir, fake.uri)
    proc = _scaling("status", str(path), cwd=tmp_path, MLFLOW_HTTP_REQUEST_TIMEOUT="soon")
    error = _one_error_line(proc, 2)
    assert "MLFLOW_HTTP_REQUEST_TIMEOUT='soon'" in error, error
