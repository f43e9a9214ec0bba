"""One study, one driver (issue 39, D9): a second `scaling submit` of a study that a live
process drives refuses at once naming its pid; a lock left by a killed driver is taken over.

"At once" is proven by what the second driver did before refusing, not by a stopwatch (issue
50): it read the lock and nothing else; it made no MLflow store or run, wrote no file, started
no process (no cell, no warm-start server). A lock names its owner by pid, start time and host,
so a live process that merely reuses a dead driver's pid holds nothing (issue 55, case 16).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from foundation.config import ConfigError
from foundation.process.proc import children
from scaling.cli import app
from scaling.state.files.driver_lock import LOCK_NAME, acquire, process_start, release
from tests.scaling.conftest import one_size_spec
from tests.scaling.helpers import poll

HOLD = (
    "import sys, time; from pathlib import Path; "
    "from scaling.state.files.driver_lock import acquire; "
    "acquire(Path(sys.argv[1])); print('held', flush=True); time.sleep(600)"
)


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under `root` with its size and modification time."""
    out = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        out[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def test_a_second_driver_refuses_naming_the_first_and_starts_nothing(tmp_path, data_dir) -> None:
    store = tmp_path / "m.db"
    spec = one_size_spec(data_dir, tmp_path / "study", f"sqlite:///{store}", 400)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    # the first driver: a live process that took the study's lock, as `scaling run` does first
    first = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path / "study")],
        cwd=Path(__file__).parents[3],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert first.stdout.readline().strip() == "held"
        lock = tmp_path / "study" / LOCK_NAME
        assert lock.read_text().split() == [
            str(first.pid),
            str(process_start(first.pid)),
            socket.gethostname(),
        ]
        before = _tree(tmp_path)
        mine = set(children(os.getpid()))
        second = CliRunner().invoke(app, ["submit", str(path)])
        started = set(children(os.getpid())) - mine
        after = _tree(tmp_path)
    finally:
        first.kill()
        first.wait()
    assert second.exit_code == 2, second.output
    errors = [line for line in second.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"already driven by pid {first.pid} " in errors[0], second.output
    assert "started" not in second.output, second.output
    # it read the lock and nothing else: no file written or touched (no MLflow store, so no
    # run; no jobs.json, no cell folder, no log), and no process started (cell, warm server)
    assert after == before, sorted(set(after) ^ set(before))
    assert not store.exists()
    assert started == set(), started


def test_a_lock_left_by_a_dead_driver_is_taken_over(tmp_path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / LOCK_NAME).write_text(f"{dead.pid} 1 {socket.gethostname()}\n")
    path = acquire(tmp_path)
    assert path.read_text().split()[0] == str(os.getpid())
    release(path)
    assert not path.exists()


@pytest.mark.parametrize("old_format", [True, False])
def test_a_live_process_reusing_the_pid_holds_nothing(tmp_path, old_format) -> None:
    """Case 16: the lock names a live process that is not its driver (the pid was reused after
    the driver was killed): the lock is stale and taken over."""
    other = subprocess.Popen(["sleep", "60"])
    try:
        poll(lambda: process_start(other.pid), 10, "the process to start", every_s=0.01)
        start = process_start(other.pid)
        lock = tmp_path / LOCK_NAME
        # an older lock names a pid alone; a lock now also the start time of the driver it was,
        # which is not this process's
        lock.write_text(
            f"{other.pid}\n" if old_format else f"{other.pid} {start - 1} {socket.gethostname()}\n"
        )
        path = acquire(tmp_path)
        assert path.read_text().split()[0] == str(os.getpid())
        release(path)
    finally:
        other.kill()
        other.wait()


def test_a_lock_of_another_host_is_honoured_naming_it(tmp_path) -> None:
    (tmp_path / LOCK_NAME).write_text(f"{os.getpid() + 1} 12345 node-elsewhere\n")
    with pytest.raises(ConfigError, match="pid .* on host node-elsewhere"):
        acquire(tmp_path)
