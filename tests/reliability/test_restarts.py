"""A local study survives its tracking stack restarting under it: PostgreSQL is restarted, then
the MLflow server is killed and restarted twice, each fault while cells train. Every cell finishes
and every metric point reaches MLflow exactly once (the spool uploads what the outage held).

Both cells hold at step 50 (the test-only pause point, jobs/loop/pause.py) for PostgreSQL's restart;
each server outage then releases one cell, which trains (and spools) under the dead server until
it comes back, so every fault lands mid-run at a known step on any machine. The released cell
may finish under the outage (its last upload then waits for the server, or `scaling run` uploads
its spool); the cell still held sees the first restart mid-run.

Runs on this module's own PostgreSQL + MLflow server (tests/reliability/services.py), never on
the shared one other tests use.
"""

from __future__ import annotations

import time

import pytest

from scaling.state.status import study_status
from tests.reliability.helpers import spooled_steps, start_cli, step_counts, wait_held
from tests.scaling.conftest import small_spec
from tests.scaling.helpers import poll, write_and_load

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # slow on a shared 2-core box
STEPS, HOLD_AT = 100, 50
OUTAGE_S = 5  # how long the server stays dead (at least) before it is restarted


def test_local_study_survives_mlflow_and_postgres_restarts(
    tmp_path, data_dir, private_stack, hold_at
):
    pg, server = private_stack
    spec = small_spec(
        data_dir,
        tmp_path / "study",
        server.uri,
        sizes=["30K"],
        variants=["linear", "nonlinear"],
        parallel={},
        tokens={"per_size": {"30K": STEPS * 256}},
        train={"checkpoint_interval": 25},
        local={"max_parallel": 2, "timeout_min": 30},
    )
    study = write_and_load(spec, tmp_path / "study.yaml")
    names = [r.cell_id for r in study_status(study)]
    cells = {name: study.folder / "cells" / name for name in names}
    log = tmp_path / "run.log"
    pause = hold_at(HOLD_AT)
    args = ["run", str(tmp_path / "study.yaml"), "--no-analyze"]
    cli = start_cli(args, log, tmp_path, pause.env())

    def trained(name: str) -> int:
        return max(spooled_steps(cells[name]), default=0)

    def outage_while_training(name: str) -> int:
        """Kill the server, release `name` and restart the server once `name` has spooled
        steps past the hold under it (points the outage holds back); the step it had reached."""
        server.kill()
        pause.release(name)
        time.sleep(OUTAGE_S)
        poll(lambda: trained(name) > HOLD_AT, 600, f"{name} to train under the outage", 0.1)
        step = trained(name)
        server.start()  # same port, same database: the cells' uploads find it again
        return step

    wait_held(pause, names, cli, log)
    assert cli.poll() is None and [trained(name) for name in names] == [HOLD_AT, HOLD_AT]
    pg.restart()  # every pooled connection of the server is cut
    faults = [f"PostgreSQL restart with both cells at step {HOLD_AT}"]
    for nth, name in enumerate(names, start=1):
        step = outage_while_training(name)
        faults.append(f"MLflow server restart {nth}: {name} trained {HOLD_AT}->{step} under it")

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
