"""KV-cache decoding (`models.decode`) gives the logits of one full forward pass.

For every built-in variant, learned and rotary positions: prefill 5 tokens, then decode 7 one
at a time from megatron's cache, batch 3; the logits equal `models.logits` of the whole
sequence within 1e-5 (float32; measured differences are ~2e-7 on logits of size ~0.6). A
control corrupts the cache and must move the logits, so the check can tell the two apart.
One spawned process builds all the models (~3 s).
"""

from __future__ import annotations

import pytest
import torch

from models.catalog.builtin_variants import BUILTINS
from tests.distributed import run_ranks
from tests.models._workers import tiny_config

TOLERANCE = 1e-5  # float32, absolute, on logits of magnitude ~0.6
PROMPT, SEQ, BATCH = 5, 12, 3
CASES = {
    **{
        f"{v}_{pe}": dict(query_variant=v, position_embedding=pe)
        for v in BUILTINS
        for pe in ("learned", "rope")
    },
    "nonlinear_gqa_qk_norm": dict(query_variant="nonlinear", num_query_groups=2, qk_norm=True),
}


def decode_worker(rank: int, world_size: int) -> dict:
    from models import build_gpt, logits
    from models.decode import Decoder, generate_logits

    out: dict = {"diff": {}, "scale": {}}
    tokens = torch.randint(0, 64, (BATCH, SEQ), generator=torch.Generator().manual_seed(0))
    for name, overrides in CASES.items():
        model = build_gpt(tiny_config(**overrides), seed=1)
        full = logits(model, tokens)
        inc = generate_logits(model, tokens, PROMPT)
        out["diff"][name] = (full - inc).abs().max().item()
        out["scale"][name] = full.abs().max().item()
        if name == "nonlinear_learned":
            decoder = Decoder(model, BATCH, SEQ)
            decoder.prefill(tokens[:, :PROMPT])
            for keys, _values in decoder.context.key_value_memory_dict.values():
                keys[:PROMPT].zero_()
            corrupted = decoder.step(tokens[:, PROMPT])
            out["control"] = (corrupted - full[:, PROMPT]).abs().max().item()
            try:
                Decoder(model, 1, 4).step(tokens[:1, 0])
            except ValueError as err:
                out["step_first"] = str(err)
            try:
                Decoder(model, 1, 64)
            except ValueError as err:
                out["too_long"] = str(err)
    return out


@pytest.fixture(scope="module")
def decoded() -> dict:
    return run_ranks(decode_worker, 1)[0]


@pytest.mark.parametrize("case", list(CASES))
def test_kv_cache_decode_equals_full_forward(case, decoded):
    assert decoded["scale"][case] > 0.1  # real logits, not zeros
    assert decoded["diff"][case] < TOLERANCE, (case, decoded["diff"][case])


def test_a_corrupted_cache_changes_the_logits(decoded):
    assert decoded["control"] > 1e-3


def test_bad_use_is_refused_with_the_fix(decoded):
    assert "call prefill(prompt) first" in decoded["step_first"]
    assert "max_len 64 exceeds the model's learned positions (16" in decoded["too_long"]
