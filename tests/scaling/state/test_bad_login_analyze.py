"""`scaling analyze STUDY` against a real MLflow basic-auth server with a wrong login: one line
naming the server and the fix, exit 2, no traceback and no password (issue 39, D2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.scaling.conftest import one_size_spec
from tests.scaling.helpers import assert_one_error_line

pytestmark = pytest.mark.slow  # ~20 s: the auth server's start


def _analyze(path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`scaling analyze STUDY` as a user types it, in the spec's folder, with `env` only."""
    return subprocess.run(
        [sys.executable, "-m", "scaling", "analyze", str(path)],
        cwd=path.parent,
        env={**env, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_analyze_with_a_wrong_login_is_one_line(auth_server, tmp_path, data_dir) -> None:
    wrong = "wrong-" + auth_server.password[::-1]
    spec = one_size_spec(data_dir, tmp_path / "study", auth_server.uri, steps=6)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_TRACKING_")}
    env = {**clean, "MLFLOW_TRACKING_USERNAME": "alice", "MLFLOW_TRACKING_PASSWORD": wrong}
    proc = _analyze(path, env)
    error = assert_one_error_line(proc, wrong, "error: ")
    assert "401" in error and "MLFLOW_TRACKING_PASSWORD" in error, error
    assert not (tmp_path / "study").exists()  # no analysis folder, nothing written
    assert not Path(tmp_path / "results").exists()


def test_analyze_reads_the_studys_credentials_file(auth_server, tmp_path, data_dir) -> None:
    """The spec's `mlflow.credentials_file` (the one `scaling run` reads) beats a wrong login in
    the environment; a file others may read is refused in one line naming the field and fix."""
    login = tmp_path / "login.ini"
    login.write_text(
        f"[mlflow]\nmlflow_tracking_username = {auth_server.user}\n"
        f"mlflow_tracking_password = {auth_server.password}\n"
    )
    login.chmod(0o600)
    spec = one_size_spec(data_dir, tmp_path / "study", auth_server.uri, steps=6)
    spec["mlflow"]["credentials_file"] = "login.ini"  # relative to the spec's folder
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    wrong = "wrong-" + auth_server.password[::-1]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_TRACKING_")}
    env = {**clean, "MLFLOW_TRACKING_USERNAME": "alice", "MLFLOW_TRACKING_PASSWORD": wrong}

    proc = _analyze(path, env)  # logged in: the server answers that the study has no experiment yet
    error = assert_one_error_line(proc, auth_server.password, "error: ")
    assert f"experiment '{spec['mlflow']['experiment']}' not found" in error, error
    login.chmod(0o644)
    error = assert_one_error_line(_analyze(path, env), auth_server.password, "error: ")
    assert "mlflow.credentials_file" in error and "chmod 600" in error, error
