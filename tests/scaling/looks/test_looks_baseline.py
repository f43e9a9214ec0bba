"""The verdict's settings live in the study (`verdict.baseline`, `verdict.alpha`), checked at load,
and `scaling run --baseline` replaces the baseline for the whole run or is refused where it would
split the looks from the report. Nothing trains here (the end-to-end run with `--baseline` is
tests/scaling/e2e/test_looks_e2e.py)."""

from __future__ import annotations

import json

import pytest
import yaml

from foundation.config import ConfigError
from scaling.driver.environment import load_study_spec
from scaling.looks.sequential_seeds import design_of, judged_against
from scaling.state.files.look_state import looks_path
from tests.scaling.conftest import small_spec


def _load(tmp_path, data_dir, verdict=None, seeds=None, variants=("linear", "nonlinear")):
    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path / 'mlflow.db'}")
    spec["variants"] = list(variants)
    if verdict is not None:
        spec["verdict"] = verdict
    if seeds is not None:
        spec["seeds"] = seeds
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    return load_study_spec(path, check_environment=False)


def test_a_baseline_that_is_not_an_arm_fails_at_load_naming_the_field_and_the_fix(
    tmp_path, data_dir
):
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, data_dir, {"baseline": "wider_mlp", "alpha": 0.7})
    text = str(err.value)
    assert "study.verdict.baseline: 'wider_mlp' is not one of the study's arms" in text
    assert "['linear', 'nonlinear']" in text and "set `verdict: {baseline: <arm>}`" in text
    assert "study.verdict.alpha: 0.7" in text  # every problem at once


def test_the_study_carries_its_baseline_and_level_to_the_looks(tmp_path, data_dir):
    study = _load(tmp_path, data_dir, {"baseline": "nonlinear", "alpha": 0.1}, seeds={"start": 3})
    assert study.spec.verdict.baseline == "nonlinear"
    assert design_of(study).alpha == 0.1  # the looks spend the study's level
    default = _load(tmp_path, data_dir)
    assert (default.spec.verdict.baseline, default.spec.verdict.alpha) == ("linear", 0.05)


def test_baseline_override_is_the_whole_runs_or_refused(tmp_path, data_dir):
    study = _load(tmp_path, data_dir, seeds={"start": 3, "max": 5, "step": 2})
    assert judged_against(study, None) is study
    moved = judged_against(study, "nonlinear")
    assert moved.spec.verdict.baseline == "nonlinear" and moved.cells == study.cells
    assert study.spec.verdict.baseline == "linear"  # the loaded study is left as it was
    with pytest.raises(ValueError, match="--baseline: 'wider_mlp' is not one of the study's"):
        judged_against(study, "wider_mlp")
    # a look judged against linear: reporting against nonlinear would split them
    path = looks_path(study.folder)
    path.parent.mkdir(parents=True)
    look = {"look": 1, "baseline": "linear", "verdict": "undetected", "reason": "", "round": 1}
    look.update(level=0.011, stop=False, add_seeds={}, added=[])
    path.write_text(json.dumps({"design": {}, "looks": [look]}))
    with pytest.raises(ValueError, match=r"look\(s\) 1 of this study were judged against linear"):
        judged_against(study, "nonlinear")
    assert judged_against(study, "linear") is study and judged_against(study, None) is study
    # and the other way: looks judged against nonlinear, a run without --baseline is refused
    moved = judged_against(study, None)
    path.write_text(path.read_text().replace('"baseline": "linear"', '"baseline": "nonlinear"'))
    with pytest.raises(ValueError, match="judged against nonlinear.*run with --baseline nonlinear"):
        judged_against(moved, None)
    assert judged_against(moved, "nonlinear").spec.verdict.baseline == "nonlinear"


def test_a_study_of_one_arm_loads_whatever_its_baseline(tmp_path, data_dir):
    """One arm trains and is tracked (a noise or preemption study) and judges nothing: the
    default baseline is not its arm, and that is not an error."""
    study = _load(tmp_path, data_dir, variants=["nonlinear"])
    assert {c.variant for c in study.cells} == {"nonlinear"}
