"""A variant names the sites it replaces; bad names and overlaps are refused when it loads,
and no module of `models` branches on a built-in's name (they are registered like any other)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from models.catalog.sites import Variant
from models.catalog.variants import load_variant

ROOT = Path(__file__).resolve().parents[2]


def misspelt_site() -> Variant:
    return Variant(name="typo", sites={"mpl": object})


def overlapping_sites() -> Variant:
    return Variant(name="overlap", sites={"self_attention": object, "self_attention.query": object})


@pytest.mark.parametrize(
    ("factory", "needle"),
    [
        ("misspelt_site", "unknown site 'mpl' (did you mean 'mlp'?); sites: input_layernorm"),
        ("overlapping_sites", "sites 'self_attention' and 'self_attention.query' overlap"),
    ],
)
def test_a_bad_site_is_refused_naming_the_file(factory, needle):
    with pytest.raises(ValueError) as info:
        load_variant(f"{__name__}:{factory}")
    assert needle in str(info.value) and "tests/models/test_sites.py" in str(info.value)


def test_no_module_branches_on_a_builtin_variants_name():
    names = "linear|identity|nonlinear|residual_linear"
    pattern = re.compile(rf"(==|!=|\bin\b)\s*\(?[\"']({names})[\"']|[\"']({names})[\"']\s*(==|!=)")
    files = [*sorted((ROOT / "models").rglob("*.py")), ROOT / "scaling/cli/plan_command.py"]
    hits = [
        f"{path.name}:{n}: {line.strip()}"
        for path in files
        if path.name != "builtin_variants.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert hits == []


def test_the_kv_site_replaces_only_keys_and_values():
    """`self_attention.linear_kv` alone: the query stays a plain d x d projection, the fused QKV
    is gone, and the example's one projection serves as both key and value."""
    from tests.distributed import run_ranks
    from tests.models._workers import shared_kv_worker

    (out,) = run_ranks(shared_kv_worker, 1)
    prefix = "decoder.layers.0.self_attention."
    shapes = {n[len(prefix) :]: s for n, s in out["shapes"].items() if n.startswith(prefix)}
    # d = 32, 2 query groups of 8 channels: one [16, 32] projection instead of [W_K; W_V] [32, 32]
    assert shapes["linear_kv.weight"] == (16, 32), shapes
    assert shapes["query.linear.weight"] == (32, 32), shapes
    assert not any("linear_qkv" in n for n in shapes), shapes
    assert out["k_minus_v"] == 0.0
