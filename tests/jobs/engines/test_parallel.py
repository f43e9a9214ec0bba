"""TP=2, PP=2 and DP=2 on two gloo processes follow the one-process loss trajectory."""

from __future__ import annotations

import numpy as np
import pytest

from jobs.testing import tiny_run_dict
from tests.distributed import run_ranks
from tests.jobs.helpers import train_ranks

STEPS = {"steps": 4}


@pytest.fixture(scope="module")
def reference(tmp_path_factory, data_dir):
    cfg = tiny_run_dict(tmp_path_factory.mktemp("ref"), data_dir, train=STEPS)
    return run_ranks(train_ranks, 1, [cfg])[0][0]


LAYOUTS = {
    "megatron-tp2": {"parallel": {"tensor_parallel": 2}},
    "megatron-pp2": {"parallel": {"pipeline_parallel": 2}},
    "megatron-dp2": {"parallel": {"data_parallel": 2}},
    "deepspeed-zero2-dp2": {
        "engine": "deepspeed",
        "deepspeed": {"zero_stage": 2},
        "parallel": {"data_parallel": 2},
    },
    "deepspeed-zero1-tp2": {
        "engine": "deepspeed",
        "deepspeed": {"zero_stage": 1},
        "parallel": {"tensor_parallel": 2},
    },
}


@pytest.mark.slow
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_two_process_layouts_match_one_process(tmp_path, data_dir, reference, layout):
    cfg = tiny_run_dict(tmp_path, data_dir, train=STEPS, **LAYOUTS[layout])
    results = run_ranks(train_ranks, 2, [cfg])
    for (result,) in results:  # every rank reports the same loss
        assert result["status"] == "completed"
        losses = result["train_losses"]
        assert losses[-1] < losses[0] - 0.1
        np.testing.assert_allclose(result["train_losses"], reference["train_losses"], rtol=2e-5)
        assert abs(result["final_val_loss"] - reference["final_val_loss"]) < 2e-4


@pytest.mark.slow
def test_value_residual_trains_under_pipeline_parallel_as_one_process(tmp_path, data_dir):
    """Layer 1's values cross to the second stage (`models.cross_stage`) in the engine's training
    steps (4 micro-batches each) and its forward-only evaluation, as in one process."""
    variant = {"model": {"query_variant": "examples.site_examples:value_residual"}}
    one = tiny_run_dict(tmp_path / "one", data_dir, train=STEPS, **variant)
    pp2 = tiny_run_dict(
        tmp_path / "pp2", data_dir, train=STEPS, parallel={"pipeline_parallel": 2}, **variant
    )
    (reference,) = run_ranks(train_ranks, 1, [one])[0]
    for (result,) in run_ranks(train_ranks, 2, [pp2]):
        assert result["status"] == "completed"
        np.testing.assert_allclose(result["train_losses"], reference["train_losses"], rtol=2e-5)
        assert abs(result["final_val_loss"] - reference["final_val_loss"]) < 2e-4
