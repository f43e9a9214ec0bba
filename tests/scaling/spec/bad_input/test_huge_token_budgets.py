"""Absurd token budgets, found by test_bad_input_fuzz: a `tokens.tokens_per_param` so large that
a size's budget overflows a float is one error line naming the key and the fix, not `plan`'s
OverflowError; an explicit budget of 1e300 tokens is priced without listing its checkpoint
saves (a set of 1e294 of them took all the memory)."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest
import yaml

from foundation.config import ConfigError
from scaling.costs.disk import num_checkpoints_kept
from scaling.driver.environment import load_study_spec
from tests.shipped import shipped_study


@pytest.mark.parametrize("ratio", [1e300, 1e7])
def test_a_huge_token_ratio_is_one_line_naming_the_key(tmp_path, ratio):
    path = shipped_study("ladder", tmp_path)  # 680M at the top: 1e300 x N is inf
    spec = yaml.safe_load(path.read_text())
    spec["tokens"]["tokens_per_param"] = ratio
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(ConfigError) as err:
        load_study_spec(path, check_environment=False)
    (problem,) = err.value.problems
    assert problem.endswith(
        f"study.tokens.tokens_per_param: {ratio:g} is over 1e+06 tokens per parameter; give the "
        "ratio (e.g. 20), or the tokens of each size in tokens.per_size"
    ), problem


def _listed(train) -> int:
    """The count by listing every save: what `num_checkpoints_kept` must equal."""
    saves = {train.steps}
    if train.checkpoint_interval:
        saves |= set(range(train.checkpoint_interval, train.steps + 1, train.checkpoint_interval))
    kept = set(train.keep_steps)
    return min(train.keep_checkpoints, len(saves - kept)) + len(kept)


def test_checkpoints_kept_are_counted_without_listing_the_saves():
    for steps, interval, keep, keep_steps in itertools.product(
        [1, 7, 12, 30], [0, 1, 4, 5, 40], [1, 2, 3], [[], [6], [12], [5, 10, 30], [31]]
    ):
        train = SimpleNamespace(
            steps=steps, checkpoint_interval=interval, keep_checkpoints=keep, keep_steps=keep_steps
        )
        assert num_checkpoints_kept(train) == _listed(train), train
    huge = SimpleNamespace(
        steps=2 * 10**294, checkpoint_interval=1000, keep_checkpoints=2, keep_steps=[1000]
    )
    assert num_checkpoints_kept(huge) == 3  # at once: 2 rotating + the kept step 1000


@pytest.mark.parametrize(
    "name, key, value, expected",
    [
        ("paper-124m-tokens", "branches", [2.5e9, 1e300], "study.tokens.branches[1]: 1e+300"),
        ("demo", "per_size", {"12K": 1e16}, "study.tokens.per_size.12K: 1e+16"),
    ],
)
def test_a_budget_over_1e15_tokens_is_one_line_naming_it(tmp_path, name, key, value, expected):
    path = shipped_study(name, tmp_path)  # 1e300 tokens: FLOPs and seconds overflowed in plan
    spec = yaml.safe_load(path.read_text())
    spec["tokens"][key] = spec["tokens"][key] | value if key == "per_size" else value
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(ConfigError) as err:
        load_study_spec(path, check_environment=False)
    (problem,) = err.value.problems
    assert problem.endswith(f"{expected} tokens is over 1e+15"), problem
