"""A typo in a study key gets a "did you mean", and a wrong `seeds` value one line for the
form the user meant (a list or a {start, max, step} mapping), not one line per form."""

from __future__ import annotations

import pytest
import yaml

from foundation.config import ConfigError
from scaling.driver.environment import load_study_spec
from tests.shipped import shipped_study


def _problems(tmp_path, **changes) -> list[str]:
    path = shipped_study("demo", tmp_path)
    spec = yaml.safe_load(path.read_text())
    spec.update(changes)
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(ConfigError) as err:
        load_study_spec(path, check_environment=False)
    return [p.split(": ", 1)[1] for p in err.value.problems]  # without the file's name


def test_a_misspelt_key_is_named_with_the_key_it_is_close_to(tmp_path):
    spec = yaml.safe_load(shipped_study("demo", tmp_path / "a").read_text())
    (problem,) = _problems(tmp_path, sizez=spec["sizes"])
    assert problem.startswith("study: unknown field(s) sizez; did you mean sizes?"), problem
    (problem,) = _problems(tmp_path / "b", seeds={"start": 3, "mx": 5})
    assert "study.seeds: unknown field(s) mx; did you mean max?" in problem, problem


def test_an_unknown_key_far_from_any_is_not_guessed(tmp_path):
    (problem,) = _problems(tmp_path, colour="blue")
    assert "unknown field(s) colour" in problem and "did you mean" not in problem, problem


@pytest.mark.parametrize(
    "seeds, expected",
    [
        ("abc", "study.seeds: expected a list or a mapping, got str 'abc'"),
        ([0, "x"], "study.seeds[1]: expected an integer, got 'x'"),
        ({"start": 3, "max": "x"}, "study.seeds.max: expected an integer, got 'x'"),
    ],
)
def test_a_wrong_seeds_value_is_one_line_for_the_form_meant(tmp_path, seeds, expected):
    assert _problems(tmp_path, seeds=seeds) == [expected]
