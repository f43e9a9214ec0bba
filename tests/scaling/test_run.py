"""`scaling run` end to end: a CI-sized copy of the demo study, through the real CLI.

Raw stdlib text → prepared dataset → 24 local training runs → MLflow (SQLite store, parent and
children) → fits, bootstrap and verdict → verdict.json, HTML report and plots.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def ci_demo_spec(tmp_path: Path) -> dict:
    """studies/demo.yaml, shrunk: the same grid shape (4 sizes x 2 arms x 3 seeds), tiny cells."""
    spec = yaml.safe_load((REPO / "studies" / "demo.yaml").read_text())
    spec["name"] = "demo-ci"
    spec["mlflow"] = {"experiment": "demo-ci", "tracking_uri": "sqlite:///mlruns/mlflow.db"}
    spec["data"]["prepare"].update(output_dir=str(tmp_path / "data"), max_bytes=1_500_000)
    spec["data"]["prepare"]["vocab_size"] = 512
    spec["data"]["num_val_windows"] = 8
    spec["model"] = {"seq_length": 32}
    spec["ladder"]["shapes"] = {
        "50K": {"num_layers": 1, "hidden_size": 16, "num_attention_heads": 2},
        "100K": {"num_layers": 1, "hidden_size": 32, "num_attention_heads": 2},
        "300K": {"num_layers": 2, "hidden_size": 32, "num_attention_heads": 2},
        "800K": {"num_layers": 2, "hidden_size": 48, "num_attention_heads": 3},
    }
    spec["tokens"]["per_size"] = {size: 12_288 for size in spec["sizes"]}
    spec["batch"] = {"rule": "fixed", "tokens": 512, "micro_batch_size": 16}
    spec["schedule"]["warmup_steps"] = 4
    spec["train"] = {"eval_interval": 12, "log_interval": 4}
    return spec


@pytest.mark.slow
def test_scaling_run_end_to_end(tmp_path):
    spec_path = tmp_path / "demo-ci.yaml"
    spec = ci_demo_spec(tmp_path)
    spec_path.write_text(yaml.safe_dump(spec))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    scaling = [sys.executable, "-m", "scaling"]
    proc = subprocess.run(
        [*scaling, "run", str(spec_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    out = proc.stdout
    assert "24/24 done (24 completed" in out
    assert "nonlinear vs linear:" in out and "report:" in out and "MLflow UI:" in out

    report = tmp_path / "runs" / "demo-ci" / "analysis"
    verdict = json.loads((report / "verdict.json").read_text())
    (entry,) = verdict["variants"]
    assert entry["variant"] == "nonlinear"
    # one LR per (variant, size): every optimum sits at its grid's edge, so no claim is allowed
    assert entry["verdict"] == "inconclusive" and "LR not bracketed" in entry["reason"]
    assert len(entry["gain_pct_by_size"]) == 4
    html = (report / "report.html").read_text()
    assert "<img" in html and "nonlinear" in html
    assert list(report.glob("*.png")) and list(report.glob("*.svg"))

    # The MLflow tree: one parent for the study, 24 children pointing at it, each finished
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("demo-ci")
    runs = client.search_runs([exp.experiment_id], max_results=100)
    (parent,) = [r for r in runs if r.data.tags.get("scaling.role") == "study"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == 24 and len(runs) == 25
    assert {r.info.status for r in children} == {"FINISHED"}
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id, "analysis")}
    assert "analysis/verdict.json" in artifacts and "analysis/report.html" in artifacts

    # Re-running finds every cell done: nothing is trained again, no run is added
    again = subprocess.run(
        [*scaling, "run", str(spec_path), "--no-analyze"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr[-4000:]
    assert "24 cells, 24 already done" in again.stdout
    assert len(client.search_runs([exp.experiment_id], max_results=100)) == 25
