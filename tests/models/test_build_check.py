"""`plan`'s build check (models.build_check): a variant is built once, tiny, in a child process;
a build error names the variant's file and line, a miscount names the two numbers."""

from __future__ import annotations

import pytest

from models.build_check import check_build
from tests.models import _workers as w

BROKEN = "tests.variants.broken"


def test_a_variant_that_builds_with_its_declared_counts_passes():
    config = w.tiny_config(**w.CASES["conv_own_init"])
    built = check_build(config, "conv")
    assert built["params"] > 0


FAILED_BUILD = ["building its model failed: RuntimeError", "tests/variants/broken.py:21"]
MISCOUNT = ["declares 29,344 parameters in all, the built model has 27,296 (-2,048)", "broken.py"]
FLOPS = ["forward FLOPs per token, torch counts", "fix its flops"]


@pytest.mark.parametrize(
    ("factory", "needles"),
    [("fails_to_build", FAILED_BUILD), ("miscounted", MISCOUNT), ("overcounted_flops", FLOPS)],
)
def test_a_variant_that_fails_or_miscounts_is_stopped(factory, needles):
    with pytest.raises(ValueError) as info:
        check_build(w.tiny_config(query_variant=f"{BROKEN}:{factory}"), factory)
    for needle in needles:
        assert needle in str(info.value), str(info.value)
