"""WSD cooldown branches as cells of a study: the spec's checks, the family a grid
point expands to, the plan's saving, and the local executor running branches after their
stable cell (end to end through `scaling run`, a kill of the parent between branch points, and
a failed parent)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from foundation import contract as C
from foundation.config import ConfigError
from foundation.process.proc import kill_tree
from scaling.costs.plan import branch_saving, plan_study
from scaling.driver.environment import load_study_spec
from tests.scaling.conftest import small_spec
from tests.scaling.helpers import checkpoint_steps, poll, scaling_cli, study_runs
from tests.shipped import shipped_study

REPO = Path(__file__).resolve().parents[3]
STEP_TOKENS = 256  # small_spec: 8 sequences of 32 tokens per step


def _spec(tmp_path: Path, data_dir: Path, uri: str, **overrides) -> dict:
    """One size (30K, one rank), 2 arms, 3 branches at 8, 16 and 24 steps."""
    base = {
        "sizes": ["30K"],
        "parallel": {},
        "tokens": {
            "tokens_per_param": None,
            "per_size": {"30K": 24 * STEP_TOKENS},
            "branches": [1 / 3, 2 / 3, 1.0],
            "cooldown": 0.25,
        },
        "lr": {"law": "none", "grid": {"*": {"30K": [3e-3]}}},
        "schedule": {"kind": "wsd", "warmup_steps": 2},
        "train": {"checkpoint_interval": 4, "eval_interval": 8},
    }
    return small_spec(data_dir, tmp_path / "study", uri, **{**base, **overrides})


def _load(spec: dict, tmp_path: Path, name: str = "study.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(spec))
    return load_study_spec(path, check_environment=False)


def _problems(spec: dict, tmp_path: Path) -> str:
    with pytest.raises(ConfigError) as err:
        _load(spec, tmp_path)
    return str(err.value)


# --- the spec and the grid ------------------------------------------------------------------
def test_a_grid_point_becomes_a_stable_cell_and_one_branch_per_budget(tmp_path, data_dir):
    study = _load(_spec(tmp_path, data_dir, "sqlite:///x.db"), tmp_path)
    cells = {c.cell_id: c for c in study.cells}
    assert len(cells) == 2 * 4  # 2 arms x (stable + 3 branches)
    stable = cells["30K-linear-s0-lr0.003-stable"]
    assert stable.kind == C.KIND_STABLE and stable.depends_on is None
    assert stable.run.schedule.kind == "constant"
    # budgets 8, 16, 24 steps; cooldown 25% -> forks at 6, 12, 18; the stable run stops at 18
    assert stable.run.train.steps == 18 and stable.run.train.keep_steps == [6, 12, 18]
    assert stable.tags[C.TAG_CELL_KIND] == C.KIND_STABLE
    for steps, point in ((8, 6), (16, 12), (24, 18)):
        cid = f"30K-linear-s0-lr0.003-D{steps * STEP_TOKENS:.3g}"
        branch = cells[cid]
        run = branch.run
        assert branch.kind == C.KIND_BRANCH and branch.depends_on == stable.cell_id
        assert run.train.steps == steps and run.train.dataset_steps == 24
        assert run.init_from.output_dir == stable.run.output_dir and run.init_from.step == point
        assert (run.schedule.kind, run.schedule.decay_fraction) == ("wsd", 0.25)
        assert run.schedule.warmup_steps == stable.run.schedule.warmup_steps == 2
        assert branch.tags == {
            **branch.tags,
            C.TAG_CELL_ID: cid,
            C.TAG_CELL_KIND: C.KIND_BRANCH,
            C.TAG_PARENT_CELL: stable.cell_id,
            C.TAG_BRANCH_TOKENS: str(steps * STEP_TOKENS),
            C.TAG_BRANCH_STEP: str(point),
        }
        assert Path(run.output_dir).name == cid
    # a study without branches keeps its ordinary cells
    plain = _spec(tmp_path, data_dir, "sqlite:///x.db", tokens={"per_size": {"30K": 2048}})
    assert {c.kind for c in _load(plain, tmp_path, "plain.yaml").cells} == {C.KIND_RUN}


def test_explicit_token_counts_are_the_budgets_of_every_size(tmp_path, data_dir):
    tokens = {"tokens_per_param": None, "branches": [2048, 4096], "cooldown": 0.25}
    study = _load(_spec(tmp_path, data_dir, "sqlite:///x.db", tokens=tokens), tmp_path)
    branches = [c for c in study.cells if c.kind == C.KIND_BRANCH]
    assert sorted({c.run.train.steps for c in branches}) == [8, 16]


@pytest.mark.parametrize(
    ("tokens", "schedule", "message"),
    [
        ({"branches": [0.5, 2048]}, {}, r"study.tokens.branches: .* mixes fractions"),
        ({"branches": [1.0, 0.5]}, {}, r"study.tokens.branches: .* strictly increasing"),
        ({"branches": []}, {}, r"study.tokens.branches: empty"),
        ({"branches": [0.5, 1.0], "cooldown": 1.0}, {}, r"study.tokens.cooldown: 1.0"),
        ({"branches": [0.5, 1.0]}, {"kind": "cosine"}, r"study.schedule.kind: 'cosine'"),
        ({"branches": [0.5, 1.0]}, {"decay_fraction": 0.1}, r"study.schedule.decay_fraction"),
        ({"branches": [1024, 2048], "per_size": {"30K": 6144}}, {}, r"study.tokens.per_size"),
        # 3 steps with a 2-step warmup: the cooldown would start at step 2... of 3 (ok) - but
        # 1/24 of the budget is 1 step: no branch point after warmup
        ({"branches": [1 / 24, 1.0]}, {}, r"study.tokens.branches\[0\]: .* before warmup"),
        # 0.99 and 1.0 of 24 steps both round to 24 steps
        ({"branches": [0.99, 1.0]}, {}, r"study.tokens.branches\[1\]: .* round to"),
    ],
)
def test_bad_branch_specs_name_the_field_and_the_fix(tmp_path, data_dir, tokens, schedule, message):
    spec = _spec(tmp_path, data_dir, "sqlite:///x.db")
    spec["tokens"] = {"tokens_per_param": None, "per_size": {"30K": 6144}, **tokens}
    if "per_size" in tokens and tokens["branches"][0] > 1:
        spec["tokens"]["per_size"] = tokens["per_size"]
    spec["schedule"] = {**spec["schedule"], **schedule}
    assert __import__("re").search(message, _problems(spec, tmp_path))


def test_plan_shows_the_saving_against_independent_runs(tmp_path, data_dir):
    tokens = {
        "tokens_per_param": None,
        "per_size": {"30K": 80 * STEP_TOKENS},
        "branches": [0.125, 0.25, 0.5, 1.0],  # 10, 20, 40, 80 steps
        "cooldown": 0.2,
    }
    study = _load(_spec(tmp_path, data_dir, "sqlite:///x.db", tokens=tokens), tmp_path)
    saving = branch_saving(study)
    # per arm: stable 64 steps + cooldowns 2 + 4 + 8 + 16 = 94 steps, vs 10 + 20 + 40 + 80 = 150
    assert saving.num_cells == 10 and saving.num_independent_cells == 8
    assert saving.flops / saving.independent_flops == pytest.approx(94 / 150)
    assert saving.gpu_hours / saving.independent_gpu_hours == pytest.approx(94 / 150)
    assert sum(r.flops for r in plan_study(study).rows) == saving.flops
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "scaling",
            "plan",
            str(tmp_path / "study.yaml"),
            "--no-check-environment",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout
    assert "WSD branches: 10 cells" in out and "independent runs per budget: 8 cells" in out
    assert "save 37% of the FLOPs" in out


def test_the_shipped_token_study_plans(tmp_path):
    path = shipped_study("paper-124m-tokens", tmp_path)
    study = load_study_spec(path, check_environment=False)
    branches = [c for c in study.cells if c.kind == C.KIND_BRANCH]
    budgets = sorted({c.run.train.steps * c.run.tokens_per_step for c in branches})
    assert [round(b / 1e9, 1) for b in budgets] == [2.5, 7.0, 15.0, 29.0]
    # the LR search's starting grid: 4 arms x 4 LRs x seed 0, each a stable run + 4 branches
    assert len(study.cells) == 16 * 5
    saving = branch_saving(study)
    assert 0.55 < saving.flops / saving.independent_flops < 0.7


# --- the local executor -------------------------------------------------------------------------
def _by_cell(study) -> dict[str, list]:
    out: dict[str, list] = {}
    for run in study_runs(study):
        if run.data.tags.get(C.TAG_ROLE) != C.ROLE_STUDY:
            out.setdefault(run.data.tags[C.TAG_CELL_ID], []).append(run)
    return out


def _check_lineage(study) -> None:
    """One finished MLflow run per cell; each branch names its parent cell, run and fork."""
    runs = _by_cell(study)
    (study_run,) = [r for r in study_runs(study) if r.data.tags.get(C.TAG_ROLE) == C.ROLE_STUDY]
    assert sorted(runs) == sorted(c.cell_id for c in study.cells)
    assert all(len(found) == 1 for found in runs.values()), {k: len(v) for k, v in runs.items()}
    for cell in study.cells:
        (run,) = runs[cell.cell_id]
        assert run.info.status == "FINISHED", (cell.cell_id, run.info.status)
        assert run.data.tags[C.TAG_CELL_KIND] == cell.kind
        assert run.data.tags[C.TAG_PARENT] == study_run.info.run_id  # a child of the study
        if cell.kind == C.KIND_BRANCH:
            (parent,) = runs[cell.depends_on]
            assert run.data.tags[C.TAG_PARENT_CELL] == cell.depends_on
            assert run.data.tags[C.TAG_PARENT_CELL_RUN] == parent.info.run_id
            assert run.data.tags[C.TAG_BRANCH_STEP] == str(cell.run.init_from.step)
            budget = cell.run.train.steps * cell.run.tokens_per_step
            assert run.data.metrics[C.TOKENS] == budget
            assert math.isfinite(run.data.metrics[C.FINAL_VAL_LOSS])


@pytest.mark.slow
def test_scaling_run_trains_branches_after_their_stable_run_end_to_end(tmp_path, data_dir):
    spec = _spec(tmp_path, data_dir, f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}")
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    proc = scaling_cli("run", str(path), cwd=tmp_path)
    assert "8/8 done (8 completed" in proc.stdout
    study = load_study_spec(path, check_environment=False)
    _check_lineage(study)
    # every branch's first step came after its stable run's final evaluation
    from mlflow.tracking import MlflowClient

    client = MlflowClient(spec["mlflow"]["tracking_uri"])
    runs = {cid: found[0].info.run_id for cid, found in _by_cell(study).items()}
    for cell in study.cells:
        if cell.depends_on:
            parent_end = client.get_metric_history(runs[cell.depends_on], C.FINAL_VAL_LOSS)
            first = client.get_metric_history(runs[cell.cell_id], C.TRAIN_LOSS)
            assert min(m.step for m in first) == cell.run.init_from.step + 1
            assert min(m.timestamp for m in first) >= parent_end[0].timestamp
    assert (study.folder / "analysis" / "verdict.json").is_file()


@pytest.mark.slow
def test_killing_the_stable_run_between_branch_points_then_rerunning(tmp_path, data_dir):
    """No branch lost, none duplicated: one MLflow run per cell id, every branch completed and
    equal to the same branch of an uninterrupted family."""
    tokens = {
        "tokens_per_param": None,
        "per_size": {"30K": 120 * STEP_TOKENS},
        "branches": [0.25, 1.0],  # 30 and 120 steps: forks at 24 and 96
        "cooldown": 0.2,
    }
    spec = _spec(
        tmp_path,
        data_dir,
        f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}",
        variants=["linear"],
        tokens=tokens,
        local={"max_parallel": 1, "timeout_min": 20},
    )
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = load_study_spec(path, check_environment=False)
    stable = next(c for c in study.cells if c.kind == C.KIND_STABLE)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    log = open(tmp_path / "first.log", "wb")  # noqa: SIM115 - closed below
    first = subprocess.Popen(
        [sys.executable, "-m", "scaling", "submit", str(path)],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        poll(
            lambda: 24 in checkpoint_steps(stable.run.output_dir),
            600,
            lambda: (tmp_path / "first.log").read_text()[-2000:],
            every_s=0.05,
        )
    finally:
        # the submit and its training process: local jobs run in sessions of their own
        kill_tree(first.pid)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=60)
        log.close()
    assert 96 not in checkpoint_steps(stable.run.output_dir), "killed too late"
    assert not (Path(stable.run.output_dir) / "result.json").exists()

    scaling_cli("submit", str(path), cwd=tmp_path)
    _check_lineage(study)
    logs = "".join(p.read_text() for p in (study.folder / "submitit").rglob("*_log.out"))
    assert "resumed at step" in logs  # the stable run continued from its checkpoint
    # the same branches, trained uninterrupted in a fresh folder, end bitwise equal
    fresh = {**spec, "output_dir": str(tmp_path / "fresh"), "name": "fresh"}
    fresh["mlflow"] = {**spec["mlflow"], "experiment": spec["mlflow"]["experiment"] + "-fresh"}
    (tmp_path / "fresh.yaml").write_text(yaml.safe_dump(fresh))
    scaling_cli("submit", str(tmp_path / "fresh.yaml"), cwd=tmp_path)
    for cell in study.cells:
        killed = json.loads((Path(cell.run.output_dir) / "result.json").read_text())
        clean = json.loads(
            (tmp_path / "fresh" / "cells" / cell.cell_id / "result.json").read_text()
        )
        assert killed["train_losses"] == clean["train_losses"], cell.cell_id
        assert killed["final_val_loss"] == clean["final_val_loss"], cell.cell_id


def test_a_failed_stable_run_fails_its_branches_with_the_reason(tmp_path, data_dir):
    """The stable cell crashes at start (a checkpoint of another parallel layout in its output
    dir); its branches are never started, end `failed`, and status says why."""
    from scaling.state.status import study_status
    from scaling.study import Study

    tokens = {
        "tokens_per_param": None,
        "per_size": {"30K": 2048},
        "branches": [0.5, 1.0],
        "cooldown": 0.25,
    }
    spec = _spec(
        tmp_path,
        data_dir,
        f"sqlite:///{tmp_path / 'mlflow.db'}",
        variants=["linear"],
        tokens=tokens,
    )
    study = _load(spec, tmp_path)
    stable = next(c for c in study.cells if c.kind == C.KIND_STABLE)
    bogus = Path(stable.run.output_dir) / "checkpoints" / "step_00000001"
    bogus.mkdir(parents=True)
    (bogus / "complete.json").write_text(json.dumps({"step": 1, "world_size": 2}))

    result = Study(study).submit(rounds=False)
    assert len(result.submitted) == 3 and sorted(result.jobs) == [stable.cell_id]  # none started
    rows = {r.cell_id: r for r in study_status(study)}
    assert rows[stable.cell_id].state == C.FAILED
    for cell in study.cells:
        if cell.kind == C.KIND_BRANCH:
            assert rows[cell.cell_id].state == C.FAILED
            assert rows[cell.cell_id].note == f"parent {stable.cell_id} failed"
            (run,) = _by_cell(study)[cell.cell_id]
            assert run.data.tags[C.TAG_ERROR] == f"parent {stable.cell_id} failed"
            assert not (Path(cell.run.output_dir) / "checkpoints").exists()


# --- real Slurm ---------------------------------------------------------------------------------
def _slurm_spec(tmp_path: Path, data_dir: Path, uri: str, steps: int) -> dict:
    tokens = {
        "tokens_per_param": None,
        "per_size": {"30K": steps * STEP_TOKENS},
        "branches": [0.5, 1.0],
        "cooldown": 0.25,
    }
    return _spec(
        tmp_path,
        data_dir,
        uri,
        executor="slurm",
        variants=["linear"],
        tokens=tokens,
        slurm={"time_limit_min": 20, "array_parallelism": 4, "cpus_per_task": 1},
    )


def _squeue_reasons(job_ids: list[str]) -> dict[str, str]:
    out = subprocess.run(
        [
            "squeue",
            "-h",
            "-r",
            "-o",
            "%i|%T|%E",
            "-j",
            ",".join({j.split("_")[0] for j in job_ids}),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    rows = [line.split("|") for line in out.split()]
    return {jid: f"{state} {reason}" for jid, state, reason in rows}


@pytest.mark.slurm
@pytest.mark.slow
def test_slurm_branches_wait_for_their_stable_run(tmp_path, data_dir, mlflow_server, slurm_cluster):
    from scaling.study import Study

    study = _load(_slurm_spec(tmp_path, data_dir, mlflow_server, 80), tmp_path)
    result = Study(study).submit(rounds=False)
    stable = next(c for c in study.cells if c.kind == C.KIND_STABLE)
    branch_jobs = [result.jobs[c.cell_id].job_id for c in study.cells if c.depends_on]
    assert {j.split("_")[0] for j in branch_jobs} != {result.jobs[stable.cell_id].job_id}
    waiting = _squeue_reasons(branch_jobs)  # "STATE DEPENDENCY" per branch job
    parent_job = result.jobs[stable.cell_id].job_id
    expected = f"PENDING afterok:{parent_job}"
    assert all(waiting.get(j, "").startswith(expected) for j in branch_jobs), waiting
    rows = Study(study).wait(poll_s=2, timeout_s=600)
    logs = "".join(p.read_text() for p in (study.folder / "submitit").rglob("*_log.out"))
    errs = "".join(p.read_text()[-3000:] for p in (study.folder / "submitit").rglob("*_log.err"))
    assert [r.state for r in rows] == [C.COMPLETED] * 3, (rows, logs[-3000:], errs)
    _check_lineage(study)
    assert logs.count("forked from") == 2


@pytest.mark.slurm
@pytest.mark.slow
def test_slurm_failed_stable_run_fails_its_branches(
    tmp_path, data_dir, mlflow_server, slurm_cluster
):
    from scaling.state.status import study_status
    from scaling.study import Study

    study = _load(_slurm_spec(tmp_path, data_dir, mlflow_server, 16), tmp_path)
    stable = next(c for c in study.cells if c.kind == C.KIND_STABLE)
    bogus = Path(stable.run.output_dir) / "checkpoints" / "step_00000001"
    bogus.mkdir(parents=True)
    (bogus / "complete.json").write_text(json.dumps({"step": 1, "world_size": 2}))
    Study(study).submit(rounds=False)

    def ended():
        rows = study_status(study)
        return rows if all(r.state in C.ENDED_STATES for r in rows) else None

    rows = {r.cell_id: r for r in poll(ended, 300, lambda: str(study_status(study)), 2)}
    assert rows[stable.cell_id].state == C.FAILED
    for cell in study.cells:
        if cell.depends_on:
            assert rows[cell.cell_id].state == C.FAILED
            assert rows[cell.cell_id].note == f"parent {stable.cell_id} failed"
            assert not (Path(cell.run.output_dir) / "checkpoints").exists()  # never ran
