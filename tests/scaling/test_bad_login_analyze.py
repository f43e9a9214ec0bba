"""`scaling analyze STUDY` against a real MLflow basic-auth server with a wrong login: one line
naming the server and the fix, exit 2, no traceback and no password (issue 39, D2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from foundation.proc import stop
from tests.scaling.auth_server import start_auth_server
from tests.scaling.conftest import one_size_spec

pytestmark = pytest.mark.slow  # ~20 s: the auth server's start


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory):
    server = start_auth_server(tmp_path_factory.mktemp("auth_server_analyze"))
    try:
        yield server
    finally:
        stop(server.proc)


def test_analyze_with_a_wrong_login_is_one_line(auth_server, tmp_path, data_dir) -> None:
    wrong = "wrong-" + auth_server.password[::-1]
    spec = one_size_spec(data_dir, tmp_path / "study", auth_server.uri, steps=6)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_TRACKING_")}
    env = {**clean, "MLFLOW_TRACKING_USERNAME": "alice", "MLFLOW_TRACKING_PASSWORD": wrong}
    proc = subprocess.run(
        [sys.executable, "-m", "scaling", "analyze", str(path)],
        cwd=tmp_path,
        env={**env, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "Traceback" not in out and wrong not in out, out
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("error: "), out
    assert "401" in errors[0] and "MLFLOW_TRACKING_PASSWORD" in errors[0], out
    assert not (tmp_path / "study").exists()  # no analysis folder, nothing written
    assert not Path(tmp_path / "results").exists()
