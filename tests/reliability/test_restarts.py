"""A local study survives its tracking stack restarting under it: PostgreSQL is restarted, then
the MLflow server is killed and restarted twice, each fault while cells train. Every cell finishes
and every metric point reaches MLflow exactly once (the spool uploads what the outage held).

Runs on this module's own PostgreSQL + MLflow server (tests/reliability/services.py), never on
the shared one other tests use.
"""

from __future__ import annotations

import time

import pytest

from scaling.state.status import study_status
from tests.reliability.helpers import spooled_steps, start_cli, step_counts
from tests.scaling.conftest import small_spec
from tests.scaling.helpers import poll, write_and_load

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # slow on a shared 2-core box
STEPS = 1000
OUTAGE_S = 5  # how long the server stays dead before it is restarted


def test_local_study_survives_mlflow_and_postgres_restarts(tmp_path, data_dir, private_stack):
    pg, server = private_stack
    spec = small_spec(
        data_dir,
        tmp_path / "study",
        server.uri,
        sizes=["30K"],
        variants=["linear", "nonlinear"],
        parallel={},
        tokens={"per_size": {"30K": STEPS * 256}},
        train={"checkpoint_interval": 50},
        # one cell at a time: the study lasts twice as long for the same CPU, long enough for
        # three faults even when a server restart takes a minute on a busy machine
        local={"max_parallel": 1, "timeout_min": 30},
    )
    study = write_and_load(spec, tmp_path / "study.yaml")
    cells = [study.folder / "cells" / r.cell_id for r in study_status(study)]
    log = tmp_path / "run.log"
    cli = start_cli(["run", str(tmp_path / "study.yaml"), "--no-analyze"], log, tmp_path)

    def progress() -> int:
        """Steps trained so far, all cells together (spooled, whatever MLflow has seen)."""
        return sum(max(spooled_steps(c), default=0) for c in cells)

    def after(step: int) -> None:
        poll(lambda: progress() >= step or cli.poll() is not None, 600, f"step {step}", 0.2)
        assert cli.poll() is None, f"the study ended before the fault at step {step}"

    # PostgreSQL first: its restart takes seconds, a server restart can take a minute on a busy
    # machine, and the study must still be training when each fault starts.
    faults = []
    after(progress() + 50)
    pg.restart()  # every pooled connection of the server is cut
    faults.append(f"PostgreSQL restart at step {progress()}")
    for nth in (1, 2):
        after(progress() + 50)
        server.kill()
        faults.append(f"MLflow server restart {nth} at step {progress()}")
        time.sleep(OUTAGE_S)
        server.start()  # same port, same database: the cells' uploads find it again

    assert cli.wait(timeout=1200) == 0, log.read_text()[-3000:]
    rows = study_status(study)
    assert [r.state for r in rows] == ["completed", "completed"], rows
    for row in rows:
        received = step_counts(server.uri, row.run_id)
        print(
            f"[restarts] {row.cell_id}: survived {len(faults)} faults ({'; '.join(faults)}); "
            f"points expected {STEPS}, received {sum(received.values())}"
        )
        assert sorted(received) == list(range(1, STEPS + 1))  # nothing lost
        assert set(received.values()) == {1}  # nothing twice
