"""A look judged again after `looks.json` was deleted or rebuilt logs its `look/*` metrics on the
parent run once: the rerun finds each point at the look's step and adds none (issue 39, D12).
The look's MLflow side is driven directly on a real SQLite store; nothing trains."""

from __future__ import annotations

import yaml

from scaling.driver.environment import load_study_spec
from scaling.looks.sequential_seeds import _log_to_parent
from scaling.state.mlflow_state import client_for, ensure_parent_run
from tests.scaling.conftest import small_spec


def _look(number: int, estimate: float) -> dict:
    return {
        "look": number,
        "level": 0.0114,
        "info_fraction": 0.6,
        "num_paired_top": 3,
        "verdict": "undetected",
        "reason": f"look {number}: undetected, not decided; +2 at 60K",
        "top_gain_pct": {"nonlinear": {"size": "60K", "estimate": estimate, "lo": -1.0, "hi": 2.0}},
    }


def test_a_look_judged_again_adds_no_second_point_at_its_step(tmp_path, data_dir):
    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path / 'mlflow.db'}")
    spec["seeds"] = {"start": 3, "max": 5, "step": 2}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = load_study_spec(path, check_environment=False)
    client = client_for(study)
    parent = ensure_parent_run(study, client)

    _log_to_parent(study, _look(1, 0.5))
    _log_to_parent(study, _look(1, 0.5))  # looks.json deleted: the same look judged again
    _log_to_parent(study, _look(2, 0.7))  # the next look still gets its own point

    keys = sorted(k for k in client.get_run(parent).data.metrics if k.startswith("look/"))
    assert len(keys) == 6, keys
    for key in keys:
        steps = sorted(m.step for m in client.get_metric_history(parent, key))
        assert steps == [1, 2], (key, steps)
    estimates = client.get_metric_history(parent, "look/nonlinear/top_gain_pct")
    assert sorted((m.step, m.value) for m in estimates) == [(1, 0.5), (2, 0.7)]
    assert client.get_run(parent).data.tags["look/reason"].startswith("look 2:")
