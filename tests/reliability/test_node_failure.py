"""A node dies under a running job array: its cell is requeued by Slurm (or retried by the next
`scaling submit`), resumes from its checkpoint, and every cell ends as one MLflow run with each
step logged once.

Runs on its own two-node cluster (.ci/slurm/start_multinode.sh: two slurmd's on this machine,
one CPU each, so the array's two cells land on different nodes), never on the shared one.
`scontrol update state=down` stands in for the crash. Both cells hold at step 30, past their
checkpoint of step 20 (the test-only pause point, jobs/loop/pause.py), when the node goes down, and
the victim resumes at exactly the step it last saved: step 20 if Slurm's SIGKILL came before
its SIGTERM save (then its next attempt holds there again), else step 30.

The same cluster runs one cell whose two data-parallel ranks sit on the two nodes, preempted
and resumed there.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from scaling.state.status import study_status
from tests.conftest import REPO, skip_unless_required
from tests.distributed import free_port_run
from tests.reliability.helpers import (
    SCALING,
    assert_each_step_once,
    child_runs,
    cli_env,
    ended_rows,
    job_logs,
    scaling_cli,
    slurm_spec,
    step_counts,
    wait_held,
)
from tests.scaling.conftest import small_spec
from tests.scaling.helpers import checkpoint_steps, poll, study_runs, write_and_load

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(1800)]
STEPS, CHECKPOINT_EVERY, HOLD_AT = 60, 20, 30
SLURM_DIR = REPO / ".ci" / "slurm"


@pytest.fixture(scope="module")
def two_node_cluster() -> Iterator[str]:
    """SLURM_CONF of a fresh two-node cluster on free ports; stopped afterwards."""
    if os.geteuid() != 0 or shutil.which("slurmd") is None:
        skip_unless_required("a private multi-node Slurm cluster needs root and slurm-wlm")
    scratch = Path(tempfile.mkdtemp(prefix="scaling-test-slurm-multi-"))
    ctld = free_port_run(3)  # slurmctld, then one slurmd per node on the next two
    env = dict(os.environ, SLURMCTLD_PORT=str(ctld), SLURMD_PORT=str(ctld + 1))
    try:
        started = subprocess.run(
            ["bash", str(SLURM_DIR / "start_multinode.sh"), str(scratch), "1"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if started.returncode != 0:  # say why: the script's own lines and the daemons' logs
            logs = "".join(
                f"\n--- {log.name}\n" + log.read_text()[-1500:]
                for log in sorted((scratch / "log").glob("*.log"))
            )
            raise RuntimeError(f"start_multinode.sh failed:\n{started.stderr[-2000:]}{logs}")
        yield str(scratch / "slurm.conf")
    finally:
        subprocess.run(["bash", str(SLURM_DIR / "stop.sh"), str(scratch)], check=False)
        shutil.rmtree(scratch, ignore_errors=True)


def _scaling(*args: str, env: dict[str, str] | None = None) -> str:
    out = subprocess.run(
        [SCALING, *args], env=cli_env(**(env or {})), capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout


def test_a_node_going_down_under_an_array(
    tmp_path, data_dir, mlflow_server, two_node_cluster, monkeypatch, hold_at
):
    monkeypatch.setenv("SLURM_CONF", two_node_cluster)
    spec = small_spec(
        data_dir,
        tmp_path / "study",
        mlflow_server,
        executor="slurm",
        sizes=["30K"],
        variants=["linear", "nonlinear"],
        parallel={},
        tokens={"per_size": {"30K": STEPS * 256}},
        train={"checkpoint_interval": CHECKPOINT_EVERY},
        slurm={"time_limit_min": 20, "array_parallelism": 2, "cpus_per_task": 1},
    )
    study_file = tmp_path / "study.yaml"
    study = write_and_load(spec, study_file)
    cells = {r.cell_id: study.folder / "cells" / r.cell_id for r in study_status(study)}
    pause = hold_at(HOLD_AT)
    _scaling("submit", str(study_file), env=pause.env())

    def node_of(cell_id: str) -> str:
        (row,) = [r for r in study_status(study) if r.cell_id == cell_id]
        out = subprocess.run(
            ["squeue", "-h", "-j", row.job_id, "-o", "%N %T"], capture_output=True, text=True
        )
        return out.stdout.strip()

    # both cells running, one per node, each held past its checkpoint
    wait_held(pause, cells, timeout_s=300)
    assert all(node_of(c).endswith("RUNNING") for c in cells), [node_of(c) for c in cells]
    assert all(checkpoint_steps(str(p)) == [CHECKPOINT_EVERY] for p in cells.values())
    victim, survivor = sorted(cells)
    node = node_of(victim).split()[0]
    assert len({node_of(c).split()[0] for c in cells}) == 2  # one cell on each node
    pause.point(victim).reached.unlink()  # its next attempt writes it again when it holds
    subprocess.run(
        ["scontrol", "update", f"nodename={node}", "state=down", "reason=test-crash"], check=True
    )
    pause.release(survivor)
    try:
        # Slurm requeues the victim (JobRequeue=1; the node returns to service at once, as its
        # slurmd still answers, so it may run there again); if it gave up on it instead, the
        # cell shows as failed and the next `scaling submit` retries it. An end counts once two
        # polls agree and Slurm lists none of the study's jobs: a retry beside a requeued job
        # would train one cell twice.
        seen: list[dict] = []

        def ended() -> bool:
            rows = study_status(study)
            states = {r.cell_id: r.state for r in rows}
            if not seen or seen[-1] != states:
                seen.append(states)
                return False
            jobs = ",".join(sorted({r.job_id.split("_")[0] for r in rows if r.job_id}))
            queue = subprocess.run(
                ["squeue", "-h", "-r", "-j", jobs, "-o", "%i %T"], capture_output=True, text=True
            ).stdout.strip()
            return not queue and all(s in ("completed", "failed") for s in states.values())

        # Slurm SIGTERMs the victim (KillWait=5 s before SIGKILL). Saving the held step in time
        # is the designed path (jobs/loop/stop.py): the next attempt resumes at HOLD_AT, past its
        # pause point, and completes. Killed before the save, it resumes at the checkpoint and
        # holds again; if Slurm gave up on it, the cell ends failed and the next `scaling
        # submit` retries it (and that attempt holds or resumes past the hold).
        poll(
            lambda: pause.reached(victim) or ended(),
            600,
            lambda: f"the victim to hold again or the cells to end: {seen}",
            1,
        )
        retried = []
        if not pause.reached(victim) and seen[-1][victim] == "failed":
            retried = [c for c, s in seen[-1].items() if s == "failed"]
            assert retried == [victim], seen
            _scaling("submit", str(study_file), env=pause.env())
            seen.clear()
            poll(lambda: pause.reached(victim) or ended(), 600, "the retry to hold or end", 1)
        if pause.reached(victim):
            # the killed attempt saved nothing after step 20; release the new one
            resumed = CHECKPOINT_EVERY
            assert checkpoint_steps(str(cells[victim])) == [CHECKPOINT_EVERY]
            pause.release(victim)
        else:
            resumed = HOLD_AT  # its SIGTERM saved the held step before the kill
        poll(ended, 600, lambda: f"the cells to end: {seen}", 2)
    finally:
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], check=False)

    rows = study_status(study)
    assert [r.state for r in rows] == ["completed", "completed"], (rows, seen)
    children = [r for r in study_runs(study) if r.data.tags.get("scaling.role") != "study"]
    assert sorted(r.data.tags["cell_id"] for r in children) == sorted(cells)  # one run each
    logs = "".join(p.read_text() for p in (study.folder / "submitit").rglob("*_log.out"))
    assert f"{victim}: resumed at step {resumed}" in logs
    for row in rows:
        received = step_counts(mlflow_server, row.run_id)
        assert sorted(received) == list(range(1, STEPS + 1))
        assert set(received.values()) == {1}
    print(
        f"[node-failure] node {node} down at step {HOLD_AT} of {victim} (held); resumed at "
        f"step {resumed}; "
        f"{'retried by scaling submit: ' + str(retried) if retried else 'requeued by Slurm'}; "
        f"points expected {2 * STEPS}, received "
        f"{sum(sum(step_counts(mlflow_server, r.run_id).values()) for r in rows)}; "
        f"{len(children)} MLflow runs for {len(rows)} cells; states seen {seen}"
    )


def test_usr2_preemption_of_a_cell_whose_ranks_span_two_nodes(
    tmp_path, data_dir, mlflow_server, two_node_cluster, monkeypatch, hold_at
):
    """One data-parallel cell across both nodes (`slurm.tasks_per_node: 1`: a rank a node,
    gloo between them, the rendezvous at the first node's name), preempted while held past its
    checkpoint: every task saves the held step, the job requeues, resumes there and logs each
    step once."""
    monkeypatch.setenv("SLURM_CONF", two_node_cluster)
    steps, hold = 50, 25  # held past the checkpoint of step 20 when the USR2 comes
    spec = slurm_spec(
        tmp_path,
        data_dir,
        mlflow_server,
        steps,
        sizes=["60K"],
        variants=["nonlinear"],
        tokens={"per_size": {"60K": steps * 256}},
        parallel={"60K": {"data_parallel": 2}},
    )
    spec["slurm"]["tasks_per_node"] = 1
    study = write_and_load(spec, tmp_path / "s.yaml")
    pause = hold_at(hold)
    scaling_cli("submit", str(tmp_path / "s.yaml"), env=pause.env())
    (row,) = study_status(study)
    wait_held(pause, [row.cell_id], timeout_s=300)
    (row,) = study_status(study)
    placed = subprocess.run(["squeue", "-h", "-j", row.job_id, "-o", "%D %T"],
                            capture_output=True, text=True, timeout=30).stdout.split()  # fmt: skip
    assert placed == ["2", "RUNNING"], placed  # its two ranks on two nodes
    # what a preemption sends to every task of the job (submitit's job._interrupt() does this)
    subprocess.run(["scancel", "--signal=USR2", row.job_id], check=True, timeout=30)
    rows = poll(lambda: ended_rows(study), 600, "the cell to end", 2)
    logs = job_logs(study)
    assert [r.state for r in rows] == ["completed"], logs[-3000:]
    resumed = [int(s) for s in re.findall(r"resumed at step (\d+)", logs)]
    assert resumed == [hold] and not pause.released(row.cell_id), logs[-3000:]  # its stop saved it
    (run,) = child_runs(study)
    assert run.data.tags["world_size"] == "2"
    total = assert_each_step_once(mlflow_server, rows, steps)
    print(f"[slurm-2-nodes] cell preempted, resumed at step {resumed[0]}; points {total}")
