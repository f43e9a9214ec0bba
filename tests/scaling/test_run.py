"""`scaling run` end to end: a CI-sized copy of the demo study, through the real CLI.

Raw stdlib text → prepared dataset → a two-stage LR scan of local training runs → MLflow
(SQLite store, parent and children) → fits, bootstrap and verdict → verdict.json, HTML report
and plots.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.scaling.helpers import scaling_cli

REPO = Path(__file__).resolve().parents[2]


def ci_demo_spec(tmp_path: Path) -> dict:
    """studies/demo.yaml, shrunk: the same design (4 sizes x 2 arms, a one-seed 3-LR scan with
    one refinement round, then the other seeds at each arm's winner), tiny cells, and 3 seeds
    instead of 6: seeds 1-2 follow the winners by the same path as seeds 1-5, for 24 cells less."""
    spec = yaml.safe_load((REPO / "studies" / "demo.yaml").read_text())
    spec["name"] = "demo-ci"
    spec["seeds"] = [0, 1, 2]
    del spec["evaluation"]  # every cell scoring a task: tests/scaling/test_downstream_e2e.py
    del spec["output_dir"]  # the default: runs/demo-ci beside the spec (the demo's is ../runs)
    spec["mlflow"] = {"experiment": "demo-ci", "tracking_uri": "sqlite:///mlruns/mlflow.db"}
    spec["data"]["prepare"].update(output_dir=str(tmp_path / "data"), max_bytes=1_500_000)
    spec["data"]["num_val_windows"] = 8
    spec["data"]["num_select_windows"] = 8
    spec["model"]["seq_length"] = 32
    spec["tokens"]["per_size"] = {size: 12_288 for size in spec["sizes"]}
    spec["batch"] = {"rule": "fixed", "tokens": 512, "micro_batch_size": 16}  # 24 steps
    spec["schedule"]["warmup_steps"] = 4
    spec["train"] = {"eval_interval": 12, "log_interval": 4}
    return spec


@pytest.mark.slow
def test_scaling_run_end_to_end(tmp_path):
    spec_path = tmp_path / "demo-ci.yaml"
    spec = ci_demo_spec(tmp_path)
    spec_path.write_text(yaml.safe_dump(spec))
    out = scaling_cli("run", str(spec_path), cwd=tmp_path).stdout

    # The LR search: seed 0 scanned 3 LRs per arm (24 cells), at most one round added one LR
    # per arm at an edge, then the other seeds followed each arm's winner (8 per seed)
    state = json.loads((tmp_path / "runs" / "demo-ci" / "lr_search.json").read_text())
    assert state["ended"]
    rounds = [a for a in state["added"] if a["round"] == 1 and a["seeds"] == [0]]
    following = spec["seeds"][1:]
    followers = [a for a in state["added"] if a["seeds"] == following]
    assert len(rounds) <= 8 and len(followers) == 8
    assert all(a["reason"] for a in state["added"])
    num_cells = 24 + len(rounds) + len(following) * len(followers)
    assert f"{num_cells}/{num_cells} done ({num_cells} completed" in out, out[-3000:]
    assert "nonlinear vs linear:" in out and "report:" in out and "MLflow UI:" in out

    report = tmp_path / "runs" / "demo-ci" / "analysis"
    verdict = json.loads((report / "verdict.json").read_text())
    (entry,) = verdict["variants"]
    assert entry["variant"] == "nonlinear"
    outcomes = ("persists", "grows", "fades", "helps", "hurts", "undetected", "inconclusive")
    assert entry["verdict"] in outcomes  # never `none`: 3 tiny seeds cannot show +-0.5%
    assert entry["reason"] and len(entry["gain_pct_by_size"]) == 4
    # the terminal prints the same verdict lines as `scaling analyze`: rounded, no None
    from analysis.report.terminal import verdict_lines

    for line in verdict_lines(verdict):
        assert line in out, (line, out[-3000:])
    assert not any("None" in line or "not available" in line for line in verdict_lines(verdict))
    html = (report / "report.html").read_text()
    if entry["verdict"] == "undetected":  # the headline says so, with what it can detect
        assert "not resolved" in html and "detects gains of" in html
    assert "<img" in html and "nonlinear" in html and "seed sd" in html
    assert list(report.glob("*.png")) and list(report.glob("*.svg"))

    # The MLflow tree: one parent for the study, one child per cell pointing at it, each
    # finished; the children of a round carry it
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("demo-ci")
    runs = client.search_runs([exp.experiment_id], max_results=200)
    (parent,) = [r for r in runs if r.data.tags.get("scaling.role") == "study"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == num_cells and len(runs) == num_cells + 1
    assert {r.info.status for r in children} == {"FINISHED"}
    added = [r for r in children if r.data.tags.get("round") != "0"]
    assert len(added) == len(rounds) + len(following) * len(followers)
    assert all("final_select_loss" in r.data.metrics for r in children)
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id, "analysis")}
    assert "analysis/verdict.json" in artifacts and "analysis/report.html" in artifacts

    # Re-running finds every cell done: nothing is trained again, no run is added
    again = scaling_cli("run", str(spec_path), "--no-analyze", cwd=tmp_path, timeout=300)
    assert f"{num_cells} cells, {num_cells} already done" in again.stdout, again.stdout[-2000:]
    assert len(client.search_runs([exp.experiment_id], max_results=200)) == num_cells + 1
