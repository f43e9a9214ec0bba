"""The suite's group scheduler (`tests/conftest.py`, `pytest_xdist_make_scheduler`) after a worker
dies: the run ends, the test that killed its worker is failed once, the rest of its group runs.

A worker OOM-killed mid-group (a fuzz case made `plan` exhaust memory) once left the controller
waiting forever for the group: xdist re-ran the killing test on each replacement worker, and a
group handed back after the restart limit was never run nor reported. Here a throwaway suite run
through `pytest -n 2` with the project's conftest hooks loses three workers: one in group
`test_a.py` (its last test still runs, on a fresh worker) and two in `test_d.py` (its third test
is reported failed, not run, after the second loss).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SUITE = {
    "conftest.py": (
        "from tests.conftest import (  # noqa: F401 - the project's scheduler and its groups\n"
        "    pytest_collection_modifyitems, pytest_configure, pytest_xdist_make_scheduler,\n"
        ")\n"
    ),
    "test_a.py": (
        "import os, signal\n"
        "def test_a1(): pass\n"
        "def test_a2(): os.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer does\n"
        "def test_a3(): pass\n"
    ),
    "test_b.py": "import time\ndef test_b1(): time.sleep(2)\ndef test_b2(): pass\n",
    "test_c.py": "def test_c1(): pass\n",
    "test_d.py": (
        "import os\ndef test_d1(): os._exit(3)\ndef test_d2(): os._exit(3)\ndef test_d3(): pass\n"
    ),
}


def test_a_crashed_worker_fails_its_test_once_and_the_run_ends(tmp_path):
    for name, text in SUITE.items():
        (tmp_path / name).write_text(text)
    command = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA",
        "-n", "2", "--dist", "loadgroup", "--no-loadscope-reorder", str(tmp_path),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("SCALING_TEST_GROUPS", None)
    proc = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"the run never ended after a worker crash:\n{out[-3000:]}") from None
    lines = out.splitlines()
    passed = {line.split()[1] for line in lines if line.startswith("PASSED ")}
    failed = [line.split()[1] for line in lines if line.startswith("FAILED ")]
    assert proc.returncode == 1, out[-3000:]
    # the killing tests failed once each (not re-run on every replacement worker)
    assert sorted(failed) == [
        "test_a.py::test_a2", "test_d.py::test_d1", "test_d.py::test_d2", "test_d.py::test_d3",
    ], out[-3000:]  # fmt: skip
    assert passed == {
        "test_a.py::test_a1", "test_a.py::test_a3", "test_b.py::test_b1", "test_b.py::test_b2",
        "test_c.py::test_c1",
    }, out[-3000:]  # fmt: skip
    assert "not run: group 'test_d.py' lost a second worker" in out
