"""A tracking server that starts refusing the study's login mid-study (a password changed):
the driver retries for a bounded time, then stops with one line naming the login and the fix,
never the password; a server that is down (HTTP 503, connection refused) is retried past that
bound (issue 39, D3). The server is a real HTTP server on a loopback port answering as MLflow's
basic-auth app does; the driver's own status polls meet it through the real REST client."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import time

import pytest
import yaml

from scaling.driver.environment import load_study_spec
from scaling.driver.round_driver import StudyRun
from scaling.state.tracking_refusal import TrackingRefused
from tests.scaling.conftest import one_size_spec
from tests.scaling.helpers import assert_one_error_line

PASSWORD = "pw-" + "6f1d2c" * 4
REFUSAL = b"You are not authenticated. Please see https://mlflow.org/docs/latest/auth.html"


class _Server(http.server.ThreadingHTTPServer):
    # "refuse": 401 to all; "down": 503; "login-then-refuse": the loader's login check passes
    # (the password changes later), every other request is refused
    mode = "refuse"


class _Handler(http.server.BaseHTTPRequestHandler):
    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        server = self.server
        if server.mode == "login-then-refuse" and self.path == "/health":
            code, body = 200, b"OK"  # open even on a basic-auth server
        elif server.mode == "login-then-refuse" and self.path.endswith("/experiments/search"):
            code, body = 200, b'{"experiments": []}'
        elif server.mode == "down":
            code, body = 503, b"Service Unavailable"
        else:
            code, body = 401, REFUSAL
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args) -> None:  # quiet
        pass


@pytest.fixture
def server():
    httpd = _Server(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def login(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "alice")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", PASSWORD)


def _study_file(tmp_path, data_dir, uri: str):
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(one_size_spec(data_dir, tmp_path / "study", uri, steps=6)))
    return path


def _watch(study, said: list[str], give_up_s: float) -> None:
    def say(line: str) -> None:
        said.append(line)
        assert len(said) < 20, f"still retrying after {len(said)} lines: {said[-3:]}"

    run = StudyRun(study, say=say, poll_s=0.05, refused_give_up_s=give_up_s)
    # what `run`, `submit` and `status --watch` wait in
    run.watcher.watched(run.watcher.progress(set()))


def test_a_refused_login_gives_up_after_the_bound_with_the_cause(tmp_path, data_dir, server, login):
    uri = f"http://127.0.0.1:{server.server_address[1]}"
    study = load_study_spec(_study_file(tmp_path, data_dir, uri), check_environment=False)
    said: list[str] = []
    start = time.monotonic()
    with pytest.raises(TrackingRefused) as err:
        _watch(study, said, give_up_s=1.0)
    took = time.monotonic() - start
    assert took >= 1.0, took  # waited out its bound (a lower bound: load cannot fake it)
    line = str(err.value)
    assert "\n" not in line and PASSWORD not in line and PASSWORD not in "".join(said)
    assert f"the tracking server {uri} refused the login of user 'alice'" in line, line
    assert "HTTP 401" in line and "MLFLOW_TRACKING_PASSWORD" in line, line
    assert "`scaling run` again" in line, line
    assert len(said) == 1 and "refused the login (HTTP 401); retrying for up to 1 s" in said[0]


@pytest.mark.parametrize("fault", ["HTTP 503", "connection refused"])
def test_a_server_that_is_down_is_retried_past_the_bound(tmp_path, data_dir, server, login, fault):
    if fault == "HTTP 503":
        server.mode = "down"
        port = server.server_address[1]
    else:
        with socket.socket() as sock:  # a port nothing listens on
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
    study = load_study_spec(
        _study_file(tmp_path, data_dir, f"http://127.0.0.1:{port}"), check_environment=False
    )
    said: list[str] = []
    start = time.monotonic()

    class Enough(Exception):
        pass

    def say(line: str) -> None:
        said.append(line)
        if len(said) == 2:  # each failed poll takes ~3 s (the REST client's own retries)
            raise Enough

    run = StudyRun(study, say=say, poll_s=0.05, refused_give_up_s=0.5)
    with pytest.raises(Enough):
        run.watcher.watched(run.watcher.progress(set()))
    assert time.monotonic() - start > 2.0  # four times the bound, and still retrying
    assert all("status unavailable (" in s for s in said), said
    assert all(s.endswith("; retrying") for s in said), said


def test_status_watch_stops_with_one_line_and_exit_2(tmp_path, data_dir, server):
    server.mode = "login-then-refuse"  # the load's login check passes, every poll is refused
    path = _study_file(tmp_path, data_dir, f"http://127.0.0.1:{server.server_address[1]}")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_TRACKING_")}
    env = {
        **clean,
        "MLFLOW_TRACKING_USERNAME": "alice",
        "MLFLOW_TRACKING_PASSWORD": PASSWORD,
        "SCALING_LOGIN_GIVE_UP_S": "1",
        "OMP_NUM_THREADS": "1",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "scaling", "status", str(path), "--watch", "--interval", "0.2"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    error = assert_one_error_line(proc, PASSWORD, "error: the tracking server ")
    assert "refused the login of user 'alice'" in error, error
