"""`plan` (cells and cost), the cell-state rule, and the CLI commands on a study."""

from __future__ import annotations

import re

import pytest
import yaml
from typer.testing import CliRunner

from foundation.config import ConfigError
from scaling.backends.queued import QUEUED
from scaling.cli import app
from scaling.costs.plan import plan_study
from scaling.spec.grid import expand_cells
from scaling.spec.loader import resolve, study_from_dict, vocab_size
from scaling.state.files.job_records import JobRecord
from scaling.state.run_cache import CellRun
from scaling.state.status import cell_state, never_started
from tests.scaling.conftest import small_spec


def _run(status: str, outcome: str | None = None, final: float | None = None) -> CellRun:
    return CellRun("r", status, outcome, final, final, 0, None)


@pytest.mark.parametrize(
    "run,live,expected",
    [
        (None, None, "pending"),
        (None, "PENDING", "queued"),
        (_run("SCHEDULED"), "PENDING", "queued"),
        (_run("SCHEDULED"), "REQUEUED", "queued"),
        (_run("RUNNING", "running"), "RUNNING", "running"),
        (_run("RUNNING", "running"), "COMPLETING", "running"),
        (_run("FINISHED", "completed", 3.0), None, "completed"),
        (_run("FINISHED", "completed", 3.0), "COMPLETING", "completed"),
        # finished without its final loss: failed, as the report's table says (`run_state`)
        (_run("FINISHED", "completed"), None, "failed"),
        (_run("FINISHED", "running", 3.0), None, "failed"),
        (_run("FINISHED", "diverged"), None, "diverged"),
        (_run("RUNNING", "running"), None, "failed"),  # its job died without finishing the run
        (_run("SCHEDULED"), None, "failed"),  # its job never started and is gone
        (_run("FAILED"), None, "failed"),
        (_run("KILLED"), None, "cancelled"),  # cancelled: retried by the next submit
        (_run("KILLED"), "PENDING", "queued"),  # ... and queued again once resubmitted
    ],
)
def test_cell_state(run, live, expected):
    assert cell_state(run, live) == expected


def test_a_cell_whose_submit_died_before_its_job_is_pending():
    """Issue 55, case 12: a driver killed while the cell waited for a slot gave it no job:
    nothing ran, so nothing failed (no retry is charged); a run that ended keeps its state."""
    assert cell_state(_run("SCHEDULED"), None, unstarted=True) == "pending"
    # a run just made (MLflow: RUNNING) by a submit killed before it marked it SCHEDULED
    assert cell_state(_run("RUNNING"), None, unstarted=True) == "pending"
    assert cell_state(_run("FAILED"), None, unstarted=True) == "failed"
    assert cell_state(_run("KILLED"), None, unstarted=True) == "cancelled"
    assert never_started(None)
    assert never_started(JobRecord("c", "local", f"{QUEUED}123", 0.0))
    assert not never_started(JobRecord("c", "local", "4567", 0.0))


def test_plan_costs_every_cell_from_the_accounting(tmp_path, data_dir):
    from models.accounting import flops_per_token

    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path}/m.db")
    spec["variants"] = ["linear", "identity", "wider_mlp"]
    spec["cost"] = {"flops_per_gpu_s": 1e9}
    study = study_from_dict(spec)
    plan = plan_study(resolve(study))
    assert plan.num_runs == 2 * 3
    by_arm = {(r.size, r.variant): r for r in plan.rows}
    for row in plan.rows:
        assert row.tokens == 3072 and row.steps == 12
        assert row.gpus == (2 if row.size == "60K" else 1)
        assert row.hours == pytest.approx(row.flops / (row.gpus * 1e9) / 3600)
    for size in ("30K", "60K"):
        # identity has no W_Q (d^2 fewer weights per layer); wider_mlp has 0.75 d x d x 2 more
        layers = study.shape(size).num_layers
        lin = by_arm[(size, "linear")].num_nonembedding_params
        assert lin - by_arm[(size, "identity")].num_nonembedding_params == layers * 48 * 48
        wider = by_arm[(size, "wider_mlp")].num_nonembedding_params
        assert wider - lin == layers * 2 * 48 * (228 - 192)
    for row, cell in zip(plan.rows, expand_cells(study, vocab_size(study)), strict=True):
        assert row.flops == flops_per_token(cell.run.model) * row.tokens
    assert plan.gpu_hours == pytest.approx(sum(r.flops for r in plan.rows) / 1e9 / 3600)


def test_cli_plan_and_status(tmp_path, data_dir):
    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path}/m.db")
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    runner = CliRunner()
    result = runner.invoke(app, ["plan", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "30K-linear-s0" in result.output and "4 runs" in result.output
    result = runner.invoke(app, ["status", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert result.output.count("pending") == 4 + 1  # 4 rows and the "4 pending" tally


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_cli_plan_warns_about_an_unreachable_server_and_still_prints_the_costs(tmp_path, data_dir):
    uri = f"http://127.0.0.1:{_closed_port()}"
    spec = small_spec(data_dir, tmp_path / "study", uri)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    runner = CliRunner()
    result = runner.invoke(app, ["plan", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "30K-linear-s0" in result.output and "4 runs" in result.output
    assert "warning:" in result.stderr and "does not answer" in result.stderr
    assert "--no-check-environment" in result.stderr
    quiet = runner.invoke(app, ["plan", "--no-check-environment", str(path)])
    assert quiet.exit_code == 0 and "warning" not in quiet.stderr
    refused = runner.invoke(app, ["submit", str(path)])
    assert refused.exit_code == 2 and "does not answer" in refused.stderr
    assert not (tmp_path / "study").exists()


def test_cli_reports_a_bad_spec_without_a_traceback(tmp_path, data_dir):
    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path}/m.db", seeds=[])
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    result = CliRunner().invoke(app, ["submit", str(path)])
    assert result.exit_code == 2
    assert "study.seeds: empty" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "study").exists()


def test_slurm_job_parameters_follow_each_cell_parallelism(tmp_path, data_dir):
    from submitit.slurm.slurm import _make_sbatch_string

    from scaling.backends.slurm.parameters import slurm_parameters

    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path}/m.db")
    spec["slurm"] = {
        "partition": "gpu",
        "account": "lab",
        "gpus_per_node": 8,
        "time_limit_min": 90,
        "additional": {"exclusive": True},
        "setup": ["module load cuda"],
    }
    study = study_from_dict(spec)
    gpu16 = slurm_parameters(study, world_size=16)  # e.g. TP 2 x DP 8 over two 8-GPU nodes
    assert (gpu16["nodes"], gpu16["ntasks_per_node"], gpu16["gpus_per_node"]) == (2, 8, 8)
    gpu2 = slurm_parameters(study, world_size=2)
    assert (gpu2["nodes"], gpu2["ntasks_per_node"], gpu2["gpus_per_node"]) == (1, 2, 2)
    sbatch = _make_sbatch_string(command="python -m x", folder=str(tmp_path / "logs"), **gpu16)
    for line in (
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=8",
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --partition=gpu",
        "#SBATCH --account=lab",
        "#SBATCH --time=90",
        f"#SBATCH --chdir={study.folder}",  # nothing lands where submit ran
        "#SBATCH --exclusive",
        "module load cuda",
    ):
        assert line in sbatch, line
    assert f"--output={tmp_path / 'logs'}" in sbatch

    spec["slurm"] = {"cpus_per_task": 2}  # CPU nodes: one task per rank, no GPU request
    cpu = slurm_parameters(study_from_dict(spec), world_size=2)
    assert (cpu["nodes"], cpu["ntasks_per_node"], "gpus_per_node" in cpu) == (1, 2, False)
    assert 'export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"' in cpu["setup"]
    spec["slurm"] = {"tasks_per_node": 1}  # CPU nodes, a rank a node: DP over nodes
    spread = slurm_parameters(study_from_dict(spec), world_size=2)
    assert (spread["nodes"], spread["ntasks_per_node"], "gpus_per_node" in spread) == (2, 1, False)


@pytest.mark.parametrize(
    "slurm,says",
    [
        ({"tasks_per_node": 0}, "study.slurm.tasks_per_node: 0 must be >= 1"),
        ({"tasks_per_node": 1, "gpus_per_node": 8}, "only for CPU nodes (gpus_per_node 0)"),
        ({"tasks_per_node": 2}, "size 60K has 3 ranks, not a whole number of nodes"),
    ],
)
def test_tasks_per_node_is_checked_at_load(tmp_path, data_dir, slurm, says):
    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path}/m.db")
    spec["slurm"] = slurm
    spec["parallel"] = {"60K": {"data_parallel": 3}}
    with pytest.raises(ConfigError, match=re.escape(says)):
        study_from_dict(spec)


def test_plan_of_a_large_grid_is_summed_per_size_and_variant_and_all_lists_each(tmp_path, data_dir):
    """Above 100 cells `plan` prints one row per (size, variant), with the totals of every
    cell; `--all` lists each cell (a 10,000-cell plan printed 10,000 rows)."""
    from scaling.driver.environment import load_study_spec

    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path}/m.db")
    spec["seeds"] = list(range(30))  # 2 sizes x 2 variants x 30 seeds = 120 cells
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = load_study_spec(path, check_environment=False)
    # the seeds of one cell are validated once; each is still its own, with its own seed
    assert len({c.run.seed for c in study.cells}) == 30
    assert len({c.run.data.seed for c in study.cells}) == 30
    assert len({str(c.run.output_dir) for c in study.cells}) == 120

    def plan(*args: str) -> str:
        result = CliRunner().invoke(app, ["plan", "--no-check-environment", *args, str(path)])
        assert result.exit_code == 0, result.output
        return result.output

    summary = plan()
    assert "plan, per (size, variant)" in summary
    assert "120 cells in 4 rows; `scaling plan --all` lists each" in summary
    assert "120 runs," in summary  # the totals of every cell
    assert sum(1 for c in study.cells if c.cell_id in summary) == 0
    listed = plan("--all")
    assert all(c.cell_id in listed for c in study.cells)
    assert "120 runs," in listed
