"""A variant of the user's own, from outside the package: plan → train (TP=2 too) → analyze.

`tests/variants/gated.py` defines a gated query (q = X * sigmoid(X W_g)) the way docs/variants.md
tells a user to; the study names it as ``tests.variants.gated:gated_query`` and nothing in
`models`, `jobs` or `scaling` is edited.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from scaling.costs.plan import plan_study
from scaling.state.status import study_status
from scaling.study import Study
from tests.scaling.conftest import small_spec
from tests.scaling.helpers import write_and_load

REPO = Path(__file__).resolve().parents[3]
GATED = "tests.variants.gated:gated_query"


@pytest.mark.slow
def test_a_variant_from_the_users_module_runs_through_plan_train_analyze(
    tmp_path, data_dir, mlflow_server, monkeypatch
):
    from analysis.api import run_analysis
    from analysis.judgement import table_judgement
    from analysis.tables.mlflow_io import load_study_runs

    monkeypatch.setenv("PYTHONPATH", str(REPO))  # the user's module, importable in every job
    spec = small_spec(
        data_dir,
        tmp_path / "study",
        mlflow_server,
        variants=["linear", GATED],
        parallel={"60K": {"tensor_parallel": 2}},  # the 60K cells run as 2 gloo processes
    )
    study = write_and_load(spec, tmp_path / "study.yaml")

    plan = plan_study(study)
    rows = {(r.size, r.variant): r for r in plan.rows}
    assert {v for _, v in rows} == {"linear", "gated"}
    for size in ("30K", "60K"):  # W_g has d^2 weights, like W_Q: the same N, from its accounting
        gated, linear = rows[(size, "gated")], rows[(size, "linear")]
        assert gated.num_nonembedding_params == linear.num_nonembedding_params
        assert gated.flops == linear.flops
    assert rows[("60K", "gated")].gpus == 2

    submitted = Study(study).submit(rounds=False)
    assert len(submitted.submitted) == 4
    status = study_status(study)
    assert [r.state for r in status] == ["completed"] * 4, status
    assert all(math.isfinite(r.val_loss) for r in status)

    table, parent = load_study_runs(study.mlflow.tracking_uri, study.mlflow.experiment, study.name)
    assert set(table["variant"]) == {"linear", "gated"}
    verdict = run_analysis(
        table, table_judgement("linear", num_resamples=20), tmp_path / "analysis"
    )
    assert [v["variant"] for v in verdict["variants"]] == ["gated"]
    assert (tmp_path / "analysis" / "verdict.json").is_file()
