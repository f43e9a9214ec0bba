"""Downstream tasks end to end on CPU: `scaling run` of a tiny study with
`evaluation.tasks: [scaling_local]` (real jobs, a real SQLite MLflow store, the real harness).

Every cell's run carries `eval/scaling_local/acc` and `/bpb`, and the report's Downstream
section shows the words verdict.json holds. Slow (~1-2 min on 2 busy cores): 6 cells (one size,
two arms, three seeds, the fewest a per-task interval needs), each a fresh process that imports
torch, megatron and lm_eval before its 6 steps and 16 task items.
"""

from __future__ import annotations

import json
import math
import re

import pytest
import yaml
from mlflow.tracking import MlflowClient

from foundation import contract
from tests.scaling.conftest import small_spec
from tests.scaling.helpers import scaling_cli

pytestmark = pytest.mark.slow


def test_a_study_with_evaluation_logs_tasks_per_cell_and_reports_them(tmp_path, data_dir):
    uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    spec = small_spec(
        data_dir,
        tmp_path / "study",
        uri,
        sizes=["30K"],
        seeds=[0, 1, 2],
        parallel={},
        tokens={"per_size": {"30K": 6 * 256}},
        evaluation={"tasks": ["scaling_local"], "limit": 16},
    )
    (tmp_path / "mlruns").mkdir()
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    scaling_cli("run", str(path), cwd=tmp_path)

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(spec["mlflow"]["experiment"])
    runs = client.search_runs([experiment.experiment_id])
    cells = [r for r in runs if r.data.tags.get(contract.TAG_ROLE) != contract.ROLE_STUDY]
    assert len(cells) == 6
    for run in cells:
        acc = run.data.metrics[contract.eval_metric("scaling_local", "acc")]
        bpb = run.data.metrics[contract.eval_metric("scaling_local", "bpb")]
        assert 0.0 <= acc <= 1.0 and math.isfinite(bpb) and bpb > 0

    analysis = tmp_path / "study" / "analysis"
    verdict = json.loads((analysis / "verdict.json").read_text())
    row = verdict["downstream"]["tasks"]["scaling_local"]["nonlinear"]
    assert row["gain_pct_by_size"]["30K"]["num_paired"] == 3
    section = (analysis / "report.md").read_text().split("## Downstream", 1)[1]
    shown = re.search(r"^\| scaling_local \| nonlinear \| \*\*(\w+)\*\*", section, re.MULTILINE)
    assert shown and shown.group(1) == row["verdict"]
