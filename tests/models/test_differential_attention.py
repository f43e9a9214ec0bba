"""The worked core-attention example (examples/differential_attention.py) computes what its
docstring says, from the arguments megatron hands the site, and keeps the causal mask.

Its TP = 2 and PP = 2 agreement with one process, the shared parameters' gradients on both TP
ranks included, is checked with every other variant in tests/models/test_parallel.py; its
declared counts in tests/models/test_single_process.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.distributed import run_ranks

VARIANT = "examples.differential_attention:differential_attention"


def site_worker(rank: int, world_size: int) -> dict:
    """Layer 1's core attention on one batch: its inputs, its output and its parameters; and
    the logits of two batches that differ only in their last token."""

    from models import build_gpt, logits, runtime
    from tests.models._workers import _positions, batch, tiny_config, to_numpy

    model = build_gpt(tiny_config(query_variant=VARIANT, num_query_groups=2), seed=0)
    core = model.decoder.layers[1].self_attention.core_attention
    seen: dict = {}

    def keep(module, args, kwargs, out) -> None:
        seen.setdefault("args", [a.detach() for a in args[:3]])
        seen.setdefault("mask", args[3] if len(args) > 3 else kwargs.get("attention_mask"))
        seen.setdefault("out", out.detach())

    core.register_forward_hook(keep, with_kwargs=True)
    tokens, labels = batch()
    model(tokens, _positions(), None, labels=labels)
    changed = tokens.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 64
    out = {
        "query": seen["args"][0],
        "key": seen["args"][1],
        "value": seen["args"][2],
        "mask_is_none": seen["mask"] is None,
        "out": seen["out"],
        "params": {n: p.detach().clone() for n, p in core.named_parameters()},
        "lambda_init": core.lambda_init,
        "logits": logits(model, tokens),
        "logits_changed_last": logits(model, changed),
    }
    runtime.destroy()
    return to_numpy(out)


def reference(q, k, v, params, lambda_init) -> np.ndarray:
    """The paper's formula, head by head in numpy (float64)."""
    sq, b, heads, hn = q.shape
    half, repeat = hn // 2, heads // k.shape[2]
    lam = (
        math.exp(params["lambda_q1"] @ params["lambda_k1"])
        - math.exp(params["lambda_q2"] @ params["lambda_k2"])
        + lambda_init
    )
    future = np.triu(np.ones((sq, sq), dtype=bool), k=1)  # row t may not see s > t
    out = np.zeros((sq, b, heads, hn))
    for i in range(b):
        for h in range(heads):
            qh, kh, vh = q[:, i, h], k[:, i, h // repeat], v[:, i, h // repeat]

            def softmax_map(qp, kp):
                s = qp @ kp.T / math.sqrt(half)
                s = np.where(future, -np.inf, s)
                e = np.exp(s - s.max(-1, keepdims=True))
                return e / e.sum(-1, keepdims=True)

            a = softmax_map(qh[:, :half], kh[:, :half]) - lam * softmax_map(
                qh[:, half:], kh[:, half:]
            )
            ctx = a @ vh
            ctx = ctx / np.sqrt((ctx**2).mean(-1, keepdims=True) + 1e-5)
            out[:, i, h] = ctx * params["head_norm"] * (1 - lambda_init)
    return out.reshape(sq, b, heads * hn)


@pytest.fixture(scope="module")
def site() -> dict:
    return run_ranks(site_worker, 1)[0]


def test_the_site_computes_the_papers_formula_from_megatrons_arguments(site):
    q, k, v = (site[n].astype(np.float64) for n in ("query", "key", "value"))
    assert q.shape[2] == 4 and k.shape[2] == v.shape[2] == 2  # 4 heads, 2 K/V groups
    assert site["mask_is_none"]  # the GPT passes None: the causal mask is the site's to build
    params = {n: p.astype(np.float64) for n, p in site["params"].items()}
    assert site["lambda_init"] == pytest.approx(0.8 - 0.6 * math.exp(-0.3))  # layer 2: depth 1
    want = reference(q, k, v, params, site["lambda_init"])
    np.testing.assert_allclose(site["out"], want, rtol=1e-4, atol=1e-5)


def test_the_shared_parameters_start_at_their_rules(site):
    params = site["params"]
    assert sorted(params) == ["head_norm", "lambda_k1", "lambda_k2", "lambda_q1", "lambda_q2"]
    assert (params["head_norm"] == 1.0).all()
    lambdas = np.concatenate([params[n] for n in params if n.startswith("lambda")])
    assert 0.03 < lambdas.std() < 0.3  # N(0, 0.1): 16 draws


def test_a_later_token_changes_no_earlier_prediction(site):
    before, after = site["logits"], site["logits_changed_last"]
    np.testing.assert_array_equal(before[:, :-1], after[:, :-1])
    assert np.abs(before[:, -1] - after[:, -1]).max() > 0
