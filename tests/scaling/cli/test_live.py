"""`scaling run` shows a live bar on a terminal (a pty here) and plain lines when piped."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time

import pytest

from tests.scaling.conftest import one_size_spec
from tests.scaling.helpers import write_and_load

pytestmark = pytest.mark.slow
SCALING = [sys.executable, "-m", "scaling"]


def _run_on_a_pty(args: list[str], cwd, timeout_s: float) -> tuple[int, str]:
    """Run `args` with stdout and stderr on a pseudo-terminal; (exit status, all it wrote)."""
    leader, follower = pty.openpty()
    env = dict(os.environ, COLUMNS="160", TERM="xterm-256color", OMP_NUM_THREADS="1")
    proc = subprocess.Popen(args, cwd=cwd, stdout=follower, stderr=follower, env=env)
    os.close(follower)
    chunks, deadline = [], time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(leader)
    return proc.wait(timeout=30), b"".join(chunks).decode(errors="replace")


def test_run_draws_a_live_bar_on_a_terminal_and_plain_lines_when_piped(
    tmp_path, data_dir, mlflow_server
):
    spec = one_size_spec(data_dir, tmp_path / "study", mlflow_server, 12, variants=["linear"])
    write_and_load(spec, tmp_path / "study.yaml")
    args = [*SCALING, "run", str(tmp_path / "study.yaml"), "--no-analyze"]

    status, screen = _run_on_a_pty(args, tmp_path, timeout_s=600)
    assert status == 0, screen[-3000:]
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)  # drop the terminal's control codes
    assert "\x1b[" in screen  # drawn with cursor control, i.e. redrawn in place
    assert re.search(r"cells\s*━+\s*1/1", plain), plain[-2000:]  # the filled bar, 1 of 1 cells
    assert "1 completed" in plain and "ETA" in plain
    assert "1/1 done (" not in plain  # the plain progress line is for pipes only

    # Piped, the same command (the cell is done, so it only reports) keeps the plain lines.
    piped = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert piped.returncode == 0, piped.stderr[-3000:]
    assert "1/1 done (1 completed, 0 diverged), 0 failed or cancelled" in piped.stdout
    assert "\x1b[" not in piped.stdout and not re.search(r"cells\s*━", piped.stdout)
