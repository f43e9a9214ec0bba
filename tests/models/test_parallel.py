"""TP=2 and PP=2 (two gloo processes) start from the one-process weights of the same seed and
compute what one process computes, for every variant."""

from __future__ import annotations

import numpy as np
import pytest

from tests.distributed import run_ranks
from tests.models import _workers as w

CASES = list(w.CASES)
ATOL = 2e-6  # float32: reductions happen in a different order across ranks
RTOL = 1e-4


@pytest.fixture(scope="module")
def reference() -> dict:
    return run_ranks(w.reference_worker, 1, CASES, 0)[0]


@pytest.fixture(scope="module")
def tensor_parallel() -> list[dict]:
    return run_ranks(w.tensor_parallel_worker, 2, CASES, 0)


@pytest.fixture(scope="module")
def pipeline_parallel() -> list[dict]:
    return run_ranks(w.pipeline_worker, 2, w.PIPELINE_CASES, 0)


def _is_qk_norm(name: str) -> bool:
    return "q_layernorm" in name or "k_layernorm" in name


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_tensor_parallel_matches_one_process(case, reference, tensor_parallel):
    ref = reference[case]
    ranks = [r[case] for r in tensor_parallel]
    for rank in ranks:
        assert rank["loss"] == pytest.approx(ref["loss"], rel=1e-6)
        assert rank["logits"].shape == ref["logits"].shape == (w.BATCH, w.SEQ, w.VOCAB)
        np.testing.assert_allclose(rank["logits"], ref["logits"], rtol=RTOL, atol=ATOL)
    assert set(ranks[0]["weights"]) == set(ref["grads"])
    for name, grad in ref["grads"].items():
        # Same seed -> the same full weights, whatever the TP size (CPU init, then sliced).
        np.testing.assert_array_equal(ranks[0]["weights"][name], ref["weights"][name], err_msg=name)
        got = ranks[0]["grads"][name]
        if _is_qk_norm(name):
            # Each rank normalises only its heads; megatron's finalize_model_grads sums these
            # replicated gains' grads over TP (config.qk_layernorm). Do the same here.
            got = sum(r["local_grads"][name] for r in ranks)
        np.testing.assert_allclose(got, grad, rtol=RTOL, atol=ATOL, err_msg=name)
    # Replicated (unsliced) parameters get identical gradients on every TP rank.
    for name in ref["grads"]:
        g0, g1 = ranks[0]["local_grads"][name], ranks[1]["local_grads"][name]
        if g0.shape == g1.shape == ref["grads"][name].shape and not _is_qk_norm(name):
            np.testing.assert_array_equal(g0, g1, err_msg=f"replicated {name}")


@pytest.mark.slow
@pytest.mark.parametrize("case", w.PIPELINE_CASES)
def test_pipeline_stages_start_from_one_process_weights(case, reference, pipeline_parallel):
    ref = reference[case]["weights"]
    first, last = (r[case] for r in pipeline_parallel)
    assert first["offset"] == 0 and last["offset"] == 1
    names = set(first["weights"]) | set(last["weights"])
    assert names == set(reference[case]["grads"]) | {"output_layer.weight"}
    for stage in (first, last):
        for name, weight in stage["weights"].items():
            # The last stage's tied output layer starts as the first stage's embedding.
            key = "embedding.word_embeddings.weight" if name == "output_layer.weight" else name
            np.testing.assert_array_equal(weight, ref[key], err_msg=name)


@pytest.mark.slow
@pytest.mark.parametrize("case", w.PIPELINE_CASES)
def test_pipeline_parallel_matches_one_process(case, reference, pipeline_parallel):
    ref = reference[case]
    first, last = (r[case] for r in pipeline_parallel)
    assert first["loss"] is None  # only the last stage sees the loss
    assert last["loss"] == pytest.approx(ref["loss"], rel=1e-6)
    assert "embedding.word_embeddings.weight" in first["grads"]
    assert "output_layer.weight" in last["grads"]  # the tied copy on the last stage
    for name, grad in ref["grads"].items():
        if name == "embedding.word_embeddings.weight":
            # Tied input/output embedding: megatron's finalize_model_grads all-reduces the two
            # stages' grads over the embedding group; the sum is the one-process grad.
            got = first["grads"][name] + last["grads"]["output_layer.weight"]
        else:
            (got,) = [r[case]["grads"][name] for r in pipeline_parallel if name in r[case]["grads"]]
        np.testing.assert_allclose(got, grad, rtol=RTOL, atol=ATOL, err_msg=name)


@pytest.mark.slow
@pytest.mark.parametrize("tp, pp", [(1, 4), (2, 2)])
def test_value_residual_across_stages_matches_one_process(tp, pp):
    """Layer 1's values reach every later stage (each TP rank its slice) for every micro-batch,
    and their gradients come back: 4 layers, 4 micro-batches through 1F1B, against one process."""
    ref = run_ranks(w.cross_stage_reference_worker, 1, 0)[0]
    ranks = run_ranks(w.cross_stage_worker, tp * pp, tp, pp, 0)
    last = [r for r in ranks if r["loss"] is not None]
    assert len(last) == tp  # the last stage's TP ranks
    for rank in last:
        assert rank["loss"] == pytest.approx(ref["loss"], rel=1e-6)
    for name, grad in ref["grads"].items():
        if name == "embedding.word_embeddings.weight":  # tied: first and last stage's sum
            holders = [r for r in ranks if name in r["grads"]]
            got = holders[0]["grads"][name] + last[0]["grads"]["output_layer.weight"]
        else:
            got = next(r["grads"][name] for r in ranks if name in r["grads"])
        np.testing.assert_allclose(got, grad, rtol=RTOL, atol=ATOL, err_msg=name)
