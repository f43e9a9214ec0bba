"""A real MLflow server behind MLflow's basic-auth app, on a free loopback port.

The admin creates one user (`alice`) through the server's own user API; a study then logs in
as alice. Everything the server stores (its SQLite stores, artifacts, log) lives under `root`.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import start_mlflow_server

ADMIN = "admin"


@dataclass
class AuthServer:
    proc: subprocess.Popen
    uri: str
    root: Path
    admin_password: str
    user: str
    password: str


def _post(uri: str, path: str, body: dict, user: str, password: str) -> None:
    request = urllib.request.Request(uri + path, data=json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    request.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(request, timeout=30) as resp:
        assert resp.status == 200, resp.status


def start_auth_server(root: Path) -> AuthServer:
    """Start the server (about 20 s), create user alice; the caller stops `proc`."""
    root.mkdir(parents=True, exist_ok=True)
    admin_password = "adm-" + secrets.token_hex(12)
    (root / "basic_auth.ini").write_text(
        "[mlflow]\n"
        "default_permission = EDIT\n"
        f"database_uri = sqlite:///{root / 'auth.db'}\n"
        f"admin_username = {ADMIN}\n"
        f"admin_password = {admin_password}\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
    )
    env = {
        **_clean_env(),
        "MLFLOW_AUTH_CONFIG_PATH": str(root / "basic_auth.ini"),
        # the auth app's CSRF key: required, and the same for every worker of one server
        "MLFLOW_FLASK_SERVER_SECRET_KEY": secrets.token_hex(16),
    }
    proc, uri = start_mlflow_server(root, app_args=("--app-name", "basic-auth"), env=env)
    password = "pw-" + secrets.token_hex(16)
    _post(
        uri,
        "/api/2.0/mlflow/users/create",
        {"username": "alice", "password": password},
        ADMIN,
        admin_password,
    )
    return AuthServer(proc, uri, root, admin_password, "alice", password)


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_TRACKING_")}
