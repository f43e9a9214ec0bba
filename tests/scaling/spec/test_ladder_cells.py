"""The ladder rule, the hyper-parameter laws and cell expansion, against hand-checked numbers."""

from __future__ import annotations

import math

import pytest

from scaling.spec.grid import expand_cells
from scaling.spec.ladder import (
    ARMS,
    ASPECT_TOLERANCE,
    Shape,
    nominal_params,
    parse_size,
    porian_batch_tokens,
    porian_beta2,
    porian_lr,
    shape_for_size,
)
from scaling.spec.loader import study_from_dict, vocab_size
from tests.scaling.conftest import small_spec

LADDER = ["2M", "6M", "12M", "25M", "50M", "124M", "350M", "760M", "1.3B"]


def test_parse_size():
    assert parse_size("2M") == 2e6 and parse_size("1.3B") == 1.3e9 and parse_size("500K") == 5e5
    for bad in ("2m", "M", "1.3", "-2M", "2 M", 7):
        with pytest.raises(ValueError):
            parse_size(bad)


@pytest.mark.parametrize("size", LADDER)
def test_ladder_rule_keeps_head_dim_aspect_and_size(size):
    shape = shape_for_size(size)
    assert shape.hidden_size == 64 * shape.num_attention_heads
    ratio = shape.hidden_size / shape.num_layers
    assert 64 / ASPECT_TOLERANCE <= ratio <= 64 * ASPECT_TOLERANCE
    # the closest 12 L d^2 on the grid: within 15% for these sizes
    assert abs(math.log(nominal_params(shape) / parse_size(size))) < math.log(1.15)


def test_ladder_is_monotone_and_hits_gpt3_small_shape():
    params = [nominal_params(shape_for_size(s)) for s in LADDER]
    assert params == sorted(params)
    # 85M non-embedding weights is GPT-3 small's 12 x 768 exactly (12 * 12 * 768^2 = 84.9M)
    assert shape_for_size("85M") == Shape(12, 768, 12)


def test_porian_laws_at_their_anchor():
    assert porian_lr(108e6) == pytest.approx(0.0047)
    assert porian_lr(108e6 / 8) == pytest.approx(0.0094)  # N^(-1/3)
    assert porian_batch_tokens(108e6) == pytest.approx(160 * 2048)
    assert porian_batch_tokens(8 * 108e6) == pytest.approx(4 * 160 * 2048)  # N^(2/3)
    assert porian_beta2(300_000) == 0.99 and porian_beta2(600_000) == 0.95


def _study(data_dir, tmp_path, **overrides):
    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path}/m.db", **overrides)
    return study_from_dict(spec)


def test_expansion_is_the_full_grid_with_shared_recipe(tmp_path, data_dir):
    study = _study(
        data_dir,
        tmp_path,
        variants=list(ARMS),
        seeds=[0, 1],
        lr={"multipliers": [0.5, 1.0]},
    )
    cells = expand_cells(study, vocab_size(study))
    assert len(cells) == 2 * len(ARMS) * 2 * 2
    assert len({c.cell_id for c in cells}) == len(cells)
    by_id = {(c.size, c.variant, c.seed, round(c.lr, 12)): c for c in cells}
    for size in ("30K", "60K"):
        base_lr = porian_lr(nominal_params(study.shape(size)))
        lin = by_id[(size, "linear", 0, round(base_lr, 12))].run
        for arm, overrides in ARMS.items():
            for seed in (0, 1):
                run = by_id[(size, arm, seed, round(base_lr * 0.5, 12))].run
                # same data, tokens, batch and schedule as the linear arm: only the arm differs
                assert run.data.seed == study.data.seed + seed
                assert run.train.steps == lin.train.steps == 3072 // 256
                assert run.tokens_per_step == 256
                assert run.schedule == lin.schedule
                assert run.model.num_layers == lin.model.num_layers
                assert run.model.query_variant == overrides["query_variant"]
                assert run.model.qk_norm == (arm == "linear_qknorm")
                assert run.tracking.tags["variant"] == arm
        wider = by_id[(size, "wider_mlp", 0, round(base_lr, 12))].run.model
        assert wider.ffn_hidden_size == round(4.75 * wider.hidden_size)  # 228 for d 48
    two_rank = [c for c in cells if c.size == "60K"]
    assert all(c.world_size == 2 for c in two_rank)


def test_lr_grid_per_variant_overrides_the_law(tmp_path, data_dir):
    grid = {"nonlinear": {"30K": [1e-3, 2e-3, 4e-3]}, "*": {"60K": [5e-4]}}
    study = _study(data_dir, tmp_path, lr={"law": "porian", "grid": grid})
    cells = expand_cells(study, vocab_size(study))
    lrs: dict[tuple[str, str], list[float]] = {}
    for c in cells:
        lrs.setdefault((c.size, c.variant), []).append(c.lr)
    assert lrs[("30K", "nonlinear")] == [1e-3, 2e-3, 4e-3]
    assert lrs[("30K", "linear")] == [pytest.approx(porian_lr(12 * 1 * 48**2))]
    assert lrs[("60K", "linear")] == lrs[("60K", "nonlinear")] == [5e-4]


def test_porian_batch_rule_rounds_to_whole_dp_groups(tmp_path, data_dir):
    study = _study(data_dir, tmp_path, batch={"rule": "porian", "micro_batch_size": 3})
    for cell in expand_cells(study, vocab_size(study)):
        group = cell.run.parallel.data_parallel * 3 * 32
        n = nominal_params(study.shape(cell.size))
        assert cell.run.tokens_per_step % group == 0
        assert cell.run.tokens_per_step == max(1, round(porian_batch_tokens(n) / group)) * group
        assert cell.run.optimizer.beta2 == 0.99  # tiny batches: Porian's small-batch beta2
