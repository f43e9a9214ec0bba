"""`plan`'s build check (models.build_check): a variant is built once, tiny, in a child process;
a build error names the variant's file and line, a miscount names the two numbers."""

from __future__ import annotations

import pytest

from models.build_check import build_problems
from tests.models import _workers as w

BROKEN = "tests.variants.broken"
FACTORIES = ["fails_to_build", "miscounted", "overcounted_flops"]


@pytest.fixture(scope="module")
def problems() -> dict:
    """One child process builds them all, as `plan` does for a study's arms."""
    arms = [(w.tiny_config(**w.CASES["conv_own_init"]), "conv")]
    arms += [(w.tiny_config(query_variant=f"{BROKEN}:{f}"), f) for f in FACTORIES]
    return dict(zip(["conv", *FACTORIES], build_problems(arms), strict=True))


def test_a_variant_that_builds_with_its_declared_counts_passes(problems):
    assert problems["conv"] is None  # a 1-D and a 3-D parameter, a conv's FLOPs counted


FAILED_BUILD = ["building its model failed: RuntimeError", "tests/variants/broken.py:21"]
MISCOUNT = ["declares 29,344 parameters in all, the built model has 27,296 (-2,048)", "broken.py"]
FLOPS = ["forward FLOPs per token, torch counts", "fix its flops"]


@pytest.mark.parametrize(
    ("factory", "needles"),
    [("fails_to_build", FAILED_BUILD), ("miscounted", MISCOUNT), ("overcounted_flops", FLOPS)],
)
def test_a_variant_that_fails_or_miscounts_is_stopped(problems, factory, needles):
    for needle in needles:
        assert needle in (problems[factory] or ""), problems[factory]
