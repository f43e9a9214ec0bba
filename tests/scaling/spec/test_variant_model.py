"""A variant's own model config (`Variant.model`): applied on top of the study's `model:` for its
arm only, followed by the accounting, and checked at load time with one line naming the variant
and the field (docs/variants.md, "A variant's own model config").
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from foundation.config import ConfigError
from models.accounting import forward_flops_per_token, num_params
from models.config import ModelConfig
from scaling.driver.environment import load_study_spec
from tests.scaling.conftest import one_size_spec

VARIANTS = """
from models.catalog.variants import QueryVariant, Variant


def grouped():  # one key/value head for the 2 query heads
    return Variant(name="grouped", model={"num_query_groups": 1}, flops=lambda config: 0)


def by_function():  # the same, from the config at each size
    return Variant(
        name="by_function",
        model=lambda config: {"num_query_groups": config.num_attention_heads // 2},
        flops=lambda config: 0,
    )


def typo():
    return Variant(name="typo", model={"num_query_gruops": 1}, flops=lambda config: 0)


def bad_value():  # 3 groups cannot share 2 heads
    return Variant(name="bad_value", model={"num_query_groups": 3}, flops=lambda config: 0)


def owned():  # the size owns the width
    return Variant(name="owned", model={"hidden_size": 64}, flops=lambda config: 0)
"""


@pytest.fixture
def study(tmp_path, data_dir, monkeypatch):
    """A function writing a one-size study (2 heads) of linear against `entry`."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "my_variants.py").write_text(VARIANTS)

    def write(entry: str) -> Path:
        spec = one_size_spec(data_dir, tmp_path / "out", f"sqlite:///{tmp_path / 'm.db'}", 4)
        spec.update(python_path="src", variants=["linear", f"my_variants:{entry}"])
        spec["model"]["position_embedding"] = "rope"  # study-wide: stays for both arms
        path = tmp_path / "study.yaml"
        path.write_text(yaml.safe_dump(spec))
        return path

    return write


@pytest.mark.parametrize("entry", ["grouped", "by_function"])
def test_the_override_is_the_arms_alone_and_accounting_follows(study, entry):
    cells = {c.variant: c.run.model for c in load_study_spec(study(entry), False).cells}
    base, arm = cells["linear"], cells[entry]
    assert base.num_query_groups is None and arm.num_query_groups == 1
    assert arm.hidden_size == base.hidden_size and arm.position_embedding == "rope"
    assert base.position_embedding == "rope"
    # W_K and W_V shrink from d x d to d x (1 head x head_dim) in every layer
    d, layers, kv = base.hidden_size, base.num_layers, base.kv_channels
    assert num_params(base) - num_params(arm) == layers * 2 * d * (d - kv)
    assert forward_flops_per_token(base) - forward_flops_per_token(arm) == layers * 4 * d * (d - kv)


@pytest.mark.parametrize(
    "entry, expected",
    [
        ("typo", "model.num_query_gruops is not a model config field (did you mean "),
        ("bad_value", "model.num_query_groups: 3 does not divide num_attention_heads 2"),
        ("owned", "model.hidden_size is set by the size (sizes / ladder.shapes), not by a"),
    ],
)
def test_a_bad_override_is_one_problem_naming_the_variant_and_field(study, entry, expected):
    with pytest.raises(ConfigError) as err:
        load_study_spec(study(entry), check_environment=False)
    (problem,) = err.value.problems
    assert f"study.variants[1]: variant {entry!r} (" in problem and "my_variants.py)" in problem
    assert expected in problem, problem


def test_plan_refuses_it_with_one_error_line_and_exit_2(study, tmp_path):
    path = study("typo")
    done = subprocess.run(
        [sys.executable, "-m", "scaling", "plan", "--no-check-environment", str(path)],
        cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "variant 'typo'" in errors[0], done.stderr
    assert "model.num_query_gruops" in errors[0]


def test_a_run_config_naming_the_variant_must_carry_its_fields():
    """A single run config (`scaling train`) gets no study to apply the override: built without
    it, the model would be plain attention under the name gqa."""
    fields = dict(vocab_size=64, seq_length=16, num_layers=1, hidden_size=32, num_attention_heads=4)
    with pytest.raises(ValueError, match=r"num_query_groups: variant '[^']+:gqa' sets "):
        ModelConfig(**fields, query_variant="examples.site_examples:gqa").validate()
    ModelConfig(**fields, query_variant="examples.site_examples:gqa", num_query_groups=1).validate()
