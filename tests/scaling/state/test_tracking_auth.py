"""A study against a real MLflow basic-auth server: refused before submitting with a wrong
login, and after a real run no file the study wrote, no param and no tag holds the password."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from foundation.secrets import MASK, redact_uri, split_uri_credentials
from tests.scaling.auth_server import ADMIN
from tests.scaling.conftest import one_size_spec

pytestmark = pytest.mark.slow


@pytest.fixture
def no_login_env(monkeypatch):
    for name in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.delenv(name, raising=False)


def _cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_TRACKING_")}
    return subprocess.run(
        [sys.executable, "-m", "scaling", *args],
        cwd=cwd,
        env={**clean, "OMP_NUM_THREADS": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=900,
    )


def _credentials_file(path: Path, user: str, password: str, mode: int = 0o600) -> Path:
    path.write_text(
        f"[mlflow]\nmlflow_tracking_username = {user}\nmlflow_tracking_password = {password}\n"
    )
    path.chmod(mode)
    return path


def _write_study(tmp_path: Path, data_dir: Path, uri: str, **extra) -> Path:
    spec = one_size_spec(data_dir, tmp_path / "study", uri, steps=6, variants=["linear"])
    spec["mlflow"].update(extra)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_uri_credentials_are_split_and_redacted():
    uri = "https://al%40ce:s3cr%3At@mlflow.example.org:5000/prefix"
    clean, creds = split_uri_credentials(uri)
    assert clean == "https://mlflow.example.org:5000/prefix"
    assert (creds.username, creds.password) == ("al@ce", "s3cr:t")
    assert "s3cr" not in repr(creds) and MASK in repr(creds)
    assert redact_uri(uri) == f"https://{MASK}@mlflow.example.org:5000/prefix"
    assert split_uri_credentials("sqlite:///x.db") == ("sqlite:///x.db", None)


def test_record_masks_a_password_in_the_tracking_uri():
    from foundation.config import flatten, to_dict
    from jobs.telemetry.record import redacted
    from jobs.testing import tiny_run_config

    config = tiny_run_config("/tmp/unused")
    config.tracking.tracking_uri = "http://bob:hunter22@10.0.0.1:5000"
    params = flatten(to_dict(redacted(config)))
    assert params["tracking.tracking_uri"] == f"http://{MASK}@10.0.0.1:5000"
    assert "hunter22" not in str(params)
    assert config.tracking.tracking_uri.endswith("@10.0.0.1:5000")  # the config is untouched


def test_wrong_password_is_refused_before_anything_is_submitted(
    tmp_path, data_dir, auth_server, no_login_env
):
    wrong = "wrong-" + auth_server.password[::-1]
    creds = _credentials_file(tmp_path / "login.ini", auth_server.user, wrong)
    study = _write_study(tmp_path, data_dir, auth_server.uri, credentials_file=str(creds))
    proc = _cli("submit", str(study), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "refused the login of user 'alice'" in proc.stderr
    assert "HTTP 401" in proc.stderr and str(creds) in proc.stderr
    assert wrong not in proc.stdout + proc.stderr
    assert not (tmp_path / "study").exists()  # nothing written, nothing submitted

    # the same wrong password from the environment names the variables instead
    study = _write_study(tmp_path, data_dir, auth_server.uri)
    env = {"MLFLOW_TRACKING_USERNAME": "alice", "MLFLOW_TRACKING_PASSWORD": wrong}
    proc = _cli("submit", str(study), cwd=tmp_path, env=env)
    assert proc.returncode == 2 and "MLFLOW_TRACKING_PASSWORD" in proc.stderr, proc.stderr
    assert wrong not in proc.stdout + proc.stderr
    # and no login at all says how to give one
    proc = _cli("submit", str(study), cwd=tmp_path)
    assert proc.returncode == 2 and "asks for a login (HTTP 401)" in proc.stderr, proc.stderr
    assert not (tmp_path / "study").exists()


def test_a_credentials_file_others_can_read_is_refused(tmp_path, data_dir, no_login_env):
    creds = _credentials_file(tmp_path / "login.ini", "alice", "pw-visible", mode=0o644)
    study = _write_study(tmp_path, data_dir, "http://127.0.0.1:9", credentials_file=str(creds))
    proc = _cli("plan", str(study), "--no-check-environment", cwd=tmp_path)
    assert proc.returncode == 2
    assert "study.mlflow.credentials_file" in proc.stderr and str(creds) in proc.stderr
    assert "chmod 600" in proc.stderr and "0644" in proc.stderr
    assert "pw-visible" not in proc.stdout + proc.stderr


def _files_holding(root: Path, needles: list[bytes]) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            hits += [f"{path}: {n!r}" for n in needles if n in data]
    return hits


def test_a_study_on_the_auth_server_leaves_no_credential_anywhere(
    tmp_path, data_dir, auth_server, no_login_env
):
    user, password = auth_server.user, auth_server.password
    host = auth_server.uri.removeprefix("http://")
    # the hardest case: the login written into the study's tracking URI itself
    study = _write_study(tmp_path, data_dir, f"http://{user}:{password}@{host}")
    proc = _cli("run", str(study), "--no-analyze", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    output = proc.stdout + proc.stderr
    assert password not in output

    client = MlflowClient(auth_server.uri)
    os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"] = (
        ADMIN,
        auth_server.admin_password,
    )
    runs = client.search_runs(
        [e.experiment_id for e in client.search_experiments()], max_results=100
    )
    cells = [r for r in runs if r.data.tags.get("scaling.role") != "study"]
    assert len(cells) == 1 and cells[0].info.status == "FINISHED", runs
    assert cells[0].data.params["tracking.tracking_uri"] == auth_server.uri
    for run in runs:
        assert password not in str(run.data.params) + str(run.data.tags)

    token = base64.b64encode(f"{user}:{password}".encode())
    needles = [password.encode(), token]
    written = [tmp_path / "study", auth_server.root / "artifacts"]
    assert sum(1 for root in written for p in root.rglob("*") if p.is_file()) > 10
    assert [hit for root in written for hit in _files_holding(root, needles)] == []
