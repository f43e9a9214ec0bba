"""A variant's own initialisation reaches its step-0 weights, for any parameter shape, and the
built-ins keep the exact weights they had before variants could declare init rules.

Models are built in one spawned process (megatron's global state stays out of pytest).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from tests.distributed import run_ranks
from tests.models import _workers as w
from tests.variants.conv_query import CONV_STD

# sha256 (16 hex) of each built-in case's step-0 weights at seed 0, computed on main before
# variants could declare init rules (commit a10b763): the demo's runs must not change.
PINNED = {
    "linear": "c27088807ec1a3f7",
    "identity": "e47898832706a194",
    "nonlinear": "c82cd6242cc78a19",
    "residual_linear": "c82cd6242cc78a19",
    "linear_qk_norm": "6455d9568a9d49a6",
    "nonlinear_gqa_rope": "d25dca494aa682c2",
}
FILE = "tests/variants/conv_query.py"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def built() -> dict:
    return run_ranks(w.variant_init_worker, 1)[0]


def test_builtins_keep_their_step0_weights(built):
    assert built["digests"] == PINNED


def test_a_variant_that_starts_as_the_plain_query_shows_its_init(built):
    weights = built["weights"]
    layers_alpha = weights["alpha"]  # 1-D, rule zeros()
    assert layers_alpha.shape == (32,)
    np.testing.assert_array_equal(layers_alpha, np.zeros(32))
    assert built["query_minus_plain"] == 0.0  # q == X W_Q at step 0
    conv = weights["conv"]  # 3-D, rule normal(CONV_STD): not the default N(0, 0.02)
    assert conv.shape == (32, 1, 3)
    assert conv.std() == pytest.approx(CONV_STD, rel=0.2)
    assert weights["linear_q.weight"].std() == pytest.approx(0.02, rel=0.2)  # no rule: default


def test_a_parameter_without_a_rule_names_itself_the_file_and_the_fix(built):
    err = built["errors"]["conv_query_without_rules"]
    assert "self_attention.query.conv: the parameter 'conv' of shape (32, 1, 3)" in err
    assert FILE in err and "init=lambda config: {'conv': models.catalog.init_rules.normal()}" in err
    line = next(i for i, s in enumerate(open(REPO / FILE), 1) if "self.conv = " in s)
    assert f"(created at {REPO / FILE}:{line})" in err  # the user's line, not models/init.py


def test_a_misspelt_rule_that_leaves_a_parameter_without_one_gets_a_near_miss(built):
    err = built["errors"]["conv_query_rule_typo"]
    assert "the parameter 'alpha' of shape (32,)" in err and "has no init rule" in err
    assert "rule 'alpah' names no parameter (did you mean 'alpha'?); rename the rule" in err


def test_a_missing_rule_is_suggested_by_the_parameters_role():
    """Not zeros() for a temperature (it would zero every logit); ones() for what multiplies,
    zeros() for what adds, normal() for a matrix, both with their roles when the name says
    neither (issue 54)."""
    from models.catalog.init_hints import suggested_rule

    assert suggested_rule("tau", (4,))[0] == "ones()"
    assert suggested_rule("attn_temperature", (4,))[0] == "ones()"
    assert suggested_rule("gate.scale", ())[0] == "ones()"
    assert suggested_rule("out.bias", (32,))[0] == "zeros()"
    assert suggested_rule("conv", (32, 1, 3))[0] == "normal()"
    rule, why = suggested_rule("alpha", (32,))
    assert "ones() if it multiplies" in why and "zeros() if it adds" in why


def test_a_rule_naming_no_parameter_is_refused_with_a_near_miss(built):
    err = built["errors"]["conv_query_misspelt"]
    assert "init rule 'alhpa' names no parameter" in err and "(did you mean 'alpha'?)" in err
    assert FILE in err


def test_the_code_digest_changes_when_only_the_init_rules_change(tmp_path, monkeypatch):
    from models.catalog.variants import code_digest, load_variant

    pkg = tmp_path / "own_init_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "rules.py").write_text(
        "from models.catalog.init_rules import zeros\n\n\ndef rules(config):\n"
        "    return {'alpha': zeros()}\n"
    )
    (pkg / "variant.py").write_text(
        "from models.catalog.variants import QueryVariant\n"
        "from own_init_pkg.rules import rules\n\n\n"
        "def make():\n"
        "    return QueryVariant('own', None, weights=lambda c: c.hidden_size**2, init=rules)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    name = "own_init_pkg.variant:make"
    before = code_digest(name)
    (pkg / "rules.py").write_text((pkg / "rules.py").read_text().replace("zeros", "ones"))
    assert code_digest(name) != before
    load_variant.cache_clear()
    for module in ("own_init_pkg", "own_init_pkg.rules", "own_init_pkg.variant"):
        sys.modules.pop(module, None)


def test_a_cross_layer_variant_starts_from_the_same_weights_and_changes_the_loss(built):
    linear, residual = built["sites"]["linear"], built["sites"]["value_residual"]
    assert linear["weights"].keys() == residual["weights"].keys()
    for name, weight in linear["weights"].items():
        np.testing.assert_array_equal(residual["weights"][name], weight, err_msg=name)
    assert residual["loss"] != linear["loss"]  # layer 2 mixes in layer 1's values


def test_an_output_gate_starts_at_its_rule(built):
    gated = built["sites"]["output_gate"]["weights"]
    gates = [v for n, v in gated.items() if n.endswith("linear_proj.gate")]
    assert len(gates) == 2 and all(np.all(g == 2.0) for g in gates)
    linear = built["sites"]["linear"]["weights"]
    name = "decoder.layers.0.self_attention.linear_proj.weight"  # same name, same scaled draw
    np.testing.assert_array_equal(gated[name], linear[name])


def test_a_misspelt_rules_near_miss_is_a_key_the_variant_may_write():
    """The near miss of a misspelt rule of a `Variant` (keys are paths in the layer) is the
    whole key, `mlp.w_down.weight`: the key the example writes, accepted, not refused as "not
    inside a site it replaces" (issue 54)."""
    import dataclasses

    import torch

    from models.catalog.variants import site_inits
    from models.init import _check_rules_used

    (site,) = site_inits("examples.site_examples:swiglu", None)  # {"mlp.w_down.weight": ...}
    assert site.site == "mlp" and list(site.rules) == ["w_down.weight"]
    typo = dataclasses.replace(site, rules={"w_down.weigth": site.rules["w_down.weight"]})

    class Layer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mlp = torch.nn.Module()
            self.mlp.w_down = torch.nn.Linear(4, 4, bias=False)

    model = torch.nn.Module()
    model.decoder = torch.nn.Module()
    model.decoder.layers = torch.nn.ModuleList([Layer()])
    with pytest.raises(ValueError) as err:
        _check_rules_used([typo], set(), model)
    assert "init rule 'mlp.w_down.weigth' names no parameter of mlp" in str(err.value)
    assert "(did you mean 'mlp.w_down.weight'?)" in str(err.value), str(err.value)
    assert "its parameters: mlp.w_down.weight" in str(err.value)
