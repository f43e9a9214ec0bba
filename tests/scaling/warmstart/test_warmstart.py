"""Warm start of local cells (`scaling.warmstart.server`): same results, same process semantics.

A cell forked from the warm server must compute bitwise what a cold `python -m
submitit.core._submit` computes, log to its own submitit files, die with its client, and fall
back to a cold start whenever the server cannot serve it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from foundation.config import from_dict
from foundation.process.proc import children
from jobs.testing import tiny_run_dict
from scaling.warmstart.server import CLIENT, _spawn, warm_python
from tests.scaling.helpers import dead, poll

STEPS = 40


def _submit(tmp_path: Path, data_dir: Path, python: str | None, name: str, steps: int = STEPS):
    import submitit

    from jobs import TrainingJob
    from jobs.config import RunConfig

    cfg = tiny_run_dict(tmp_path / name, data_dir, name=name, train={"steps": steps})
    executor = submitit.LocalExecutor(folder=tmp_path / "submitit", python=python)
    executor.update_parameters(timeout_min=10)
    return executor.submit(TrainingJob(from_dict(RunConfig, cfg, where="run")))


def _server_pid(python: str) -> int:
    """The warm server serving `python` (its socket path is in the command)."""
    sock = python.split()[-2].encode()

    def find() -> int | None:
        for entry in Path("/proc").iterdir():
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"scaling.warmstart.server" in cmdline and sock in cmdline:
                return int(entry.name)
        return None

    return poll(find, 10, f"the warm server for {sock!r}")


def _why(tmp_path: Path, job) -> Callable[[], str]:
    """What a timed-out wait prints: the warm server's log and the task's stderr."""

    def text() -> str:
        log = tmp_path / "warm" / "warm-server.log"
        server = log.read_text() if log.exists() else "(no log)"
        return f"the forked task; warm server log:\n{server}\ntask stderr:\n{job.stderr()}"

    return text


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("SCALING_WARM_START", raising=False)


def test_a_warm_cell_equals_a_cold_one_bitwise(tmp_path, data_dir):
    cold = _submit(tmp_path, data_dir, None, "cold").result()
    with warm_python(tmp_path / "warm") as python:
        assert python is not None
        server = _server_pid(python)
        job = _submit(tmp_path, data_dir, python, "warm")
        # the task is forked by the server, not started by the controller's command
        tasks = poll(lambda: children(server), 120, _why(tmp_path, job), every_s=0.05)
        warm = job.result()
        assert dead(tasks[0])
    assert warm.status == cold.status == "completed"
    assert warm.train_losses == cold.train_losses
    assert warm.final_val_loss == cold.final_val_loss
    assert f"step {STEPS}/{STEPS}" in job.stdout()  # the task's own log file, as cold
    assert not Path(python.split()[-2]).parent.exists()  # the socket's directory is gone


def test_the_client_command_comes_once_the_server_listens(tmp_path):
    """A cell started at once finds the socket: `warm_python` yields only after the server
    listens (the socket is renamed into place after listen()). Before, a controller that won the
    race against the server's own start ran its cell cold, and CI waited for a forked task that
    never came."""
    with warm_python(tmp_path / "warm") as python:
        sock = python.split()[-2]
        assert os.path.exists(sock)  # no wait here: it was there when the command came
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.connect(sock)  # accepted by the kernel: listen() has been called
        probe.close()


class _Counted:
    """A server-side connection whose `recv` calls are counted (and cut off at 100)."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn, self.calls = conn, 0

    def recv(self, size: int) -> bytes:
        self.calls += 1
        assert self.calls < 100, "the server spins on a closed connection"
        return self.conn.recv(size)

    def __getattr__(self, name: str):
        return getattr(self.conn, name)


def test_a_client_that_closes_at_once_is_dropped_not_spun_on():
    """A client killed before it sent its request (a terminal's Ctrl-C reaches the clients
    too): the server drops the connection and forks nothing. It used to read the closed
    socket's empty answers forever, one core busy, its driver long gone."""
    server_side, client_side = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    client_side.close()
    conn = _Counted(server_side)
    assert _spawn(conn, None, {}) is None
    assert conn.calls <= 1


def test_killing_the_client_kills_its_task(tmp_path, data_dir):
    """The controller's SIGKILL (cancel, after SIGINT) reaches the forked task."""
    with warm_python(tmp_path / "warm") as python:
        server = _server_pid(python)
        job = _submit(tmp_path, data_dir, python, "long", steps=100_000)
        (task,) = poll(lambda: children(server), 120, _why(tmp_path, job), every_s=0.05)
        (client,) = poll(lambda: children(int(job.job_id)), 30, "the client")
        poll(lambda: "step" in (job.stdout() or ""), 120, "training")
        os.kill(client, signal.SIGKILL)
        poll(lambda: not children(server), 30, "the task to be killed")
        assert dead(task)
        poll(job.done, 30, "the job to end")
    assert job.state in ("FAILED", "INTERRUPTED", "FINISHED")
    with pytest.raises(Exception):  # noqa: B017 - submitit's own error type: the job failed
        job.result()


def test_a_task_dies_with_its_server(tmp_path, data_dir):
    """A server killed outright takes its tasks along; none trains on unseen."""
    with warm_python(tmp_path / "warm") as python:
        server = _server_pid(python)
        job = _submit(tmp_path, data_dir, python, "orphan", steps=100_000)
        (task,) = poll(lambda: children(server), 120, _why(tmp_path, job), every_s=0.05)
        poll(lambda: "step" in (job.stdout() or ""), 120, "training")
        os.kill(server, signal.SIGKILL)
        poll(lambda: dead(task), 30, "the task to die with its server")
        poll(job.done, 30, "the job to end")
    with pytest.raises(Exception):  # noqa: B017 - submitit's own error type: the job failed
        job.result()


def test_without_a_server_the_task_runs_cold(tmp_path, data_dir):
    with warm_python(tmp_path / "warm") as python:
        server = _server_pid(python)
        os.kill(server, signal.SIGKILL)
        poll(lambda: dead(server), 30, "the server to die")
        result = _submit(tmp_path, data_dir, python, "cold-fallback", steps=5).result()
    assert result.status == "completed" and result.steps == 5


def test_warm_start_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALING_WARM_START", "0")
    with warm_python(tmp_path / "warm") as python:
        assert python is None


def test_the_client_runs_anything_but_a_submitit_task_cold(tmp_path):
    """The server forks `submitit.core._submit FOLDER` only; other commands never reach it."""
    out = subprocess.run(
        [sys.executable, "-I", "-S", str(CLIENT), str(tmp_path / "no-server"), sys.executable]
        + ["-c", "import sys; print('cold', sys.flags.isolated)"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.stdout.strip() == "cold 0", out.stderr


DRIVER = (
    "import sys; from pathlib import Path; import time; "
    "from scaling.warmstart.server import warm_python\n"
    "with warm_python(Path(sys.argv[1])) as python:\n"
    "    print(python, flush=True); time.sleep(600)\n"
)


def test_a_server_whose_driver_is_killed_exits(tmp_path):
    """Issue 55, case 14: a driver SIGKILLed (no cleanup runs) while its server still imports
    leaves no server behind: the server watches the driver by pid and start time, read before
    its imports, and exits once it is gone (it had no task to finish)."""
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(tmp_path / "warm")],
        cwd=Path(__file__).parents[3],
        stdout=subprocess.PIPE,
        text=True,
    )
    python = driver.stdout.readline().strip()
    server = _server_pid(python)
    driver.kill()  # while the server imports torch, megatron-core and mlflow
    driver.wait()
    poll(lambda: dead(server), 180, "the warm server to exit after its driver died")
    assert not Path(python.split()[-2]).parent.exists()  # its socket's directory went with it
