"""`seeds: {start, max, step}` (sequential seeds, analysis.stats.sequential) is parsed beside the
plain list and checked whole, each bad field named; until its looks run it is refused with the
fix. Nothing is written."""

from __future__ import annotations

import pytest
import yaml

from foundation.config import ConfigError
from scaling.rounds.environment import load_study_spec
from tests.scaling.conftest import small_spec


def _load(tmp_path, data_dir, seeds, search=None):
    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path / 'mlflow.db'}")
    spec["seeds"] = seeds
    if search is not None:
        spec["lr"] = {"multipliers": [0.5, 1.0, 2.0], "search": search}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    return load_study_spec(path), path


def test_a_valid_seed_design_is_refused_until_its_looks_run(tmp_path, data_dir):
    """The rounds are not driven yet: a study that asks for them is told so, with the fix,
    instead of running `start` seeds as if it were a fixed design."""
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, data_dir, {"start": 3, "max": 10, "step": 2})
    text = str(err.value)
    assert "study.seeds: {start: 3, max: 10, step: 2} is a sequential design" in text, text
    assert "list the seeds instead, e.g. [0, 1, 2]" in text
    assert not (tmp_path / "study").exists()


def test_a_plain_seed_list_has_no_rounds(tmp_path, data_dir):
    study, _ = _load(tmp_path, data_dir, [0, 1])
    assert study.spec.seed_rounds is None and study.spec.seeds == [0, 1]


@pytest.mark.parametrize(
    "seeds, search, fragment",
    [
        ({"start": 5, "max": 4, "step": 2}, None, "study.seeds.start: 5 is above study.seeds.max"),
        ({"start": 3, "max": 10, "step": 0}, None, "study.seeds.step: 0 must be >= 1"),
        ({"start": 2, "max": 10, "step": 2}, None, "study.seeds.start: 2 must be >= 3"),
        (
            {"start": 3, "max": 4, "step": 1},
            {"scan_seeds": 5},
            "study.seeds.max: 4 is below study.lr.search.scan_seeds (5)",
        ),
    ],
)
def test_bad_seed_rounds_are_refused_naming_the_field(tmp_path, data_dir, seeds, search, fragment):
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, data_dir, seeds, search)
    assert fragment in str(err.value), str(err.value)
    assert not (tmp_path / "study").exists()
    assert not (tmp_path / "mlflow.db").exists()
