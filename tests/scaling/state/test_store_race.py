"""Two studies (two processes) opening one new SQLite store at once (issue 39, D9): MLflow
creates the schema in whichever process opens the store first, and two at once both migrate, one
failing (`table ... already exists`) and a half-made schema left behind. `make_client` opens a
SQLite store under a lock beside it, so both succeed. Two real processes, a real store."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from foundation.sqlite_store import lock_path, schema_problem

# Each process imports MLflow, waits for the other, then both open the store at the same moment
# and make an experiment and a run in it, as the first submit of a study does.
CHILD = """
import sys, time
from pathlib import Path
from foundation.contract import ensure_experiment, make_client
uri, name, ready, go = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
import mlflow.store.tracking.sqlalchemy_store  # the import before the start line
ready.touch()
while not go.exists():
    time.sleep(0.01)
client = make_client(uri)
exp_id = ensure_experiment(client, name, uri)
client.create_run(exp_id, run_name=name)
print("ok", name)
"""


@pytest.mark.slow  # 15-35 s on 2 busy cores: two processes import MLflow, one makes the schema
def test_two_processes_make_one_new_store_at_once(tmp_path):
    store = tmp_path / "mlflow.db"
    uri = f"sqlite:///{store}"
    go = tmp_path / "go"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, uri, f"study-{i}", str(tmp_path / f"ready{i}"), str(go)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"ready{i}").exists() for i in range(2)):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
        time.sleep(0.05)
    go.touch()  # both open the store now
    outs = [p.communicate(timeout=180) for p in procs]
    for i, (proc, (out, err)) in enumerate(zip(procs, outs, strict=True)):
        assert proc.returncode == 0 and f"ok study-{i}" in out, err[-3000:]
    assert schema_problem(store) is None and lock_path(store).exists()
