"""`seeds: {start, max, step}` (sequential seeds, analysis.stats.looks.sequential) is parsed beside
the plain list and checked whole, each bad field named. Nothing is written."""

from __future__ import annotations

import pytest
import yaml

from foundation.config import ConfigError
from scaling.driver.environment import load_study_spec
from tests.scaling.conftest import small_spec


def _load(tmp_path, data_dir, seeds, search=None):
    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path / 'mlflow.db'}")
    spec["seeds"] = seeds
    if search is not None:
        spec["lr"] = {"multipliers": [0.5, 1.0, 2.0], "search": search}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    return load_study_spec(path), path


def test_a_valid_seed_design_loads_with_its_first_round_of_seeds(tmp_path, data_dir):
    """The design is kept whole; the cells are the first round's seeds 0..start-1 only (the
    looks add the rest), and loading writes nothing."""
    study, _ = _load(tmp_path, data_dir, {"start": 3, "max": 10, "step": 2})
    rounds = study.spec.seed_rounds
    assert (rounds.start, rounds.max, rounds.step) == (3, 10, 2)
    assert study.spec.seeds == [0, 1, 2]
    assert sorted({c.seed for c in study.cells}) == [0, 1, 2]
    assert not (tmp_path / "study").exists()
    assert not (tmp_path / "mlflow.db").exists()


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
