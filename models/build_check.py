"""Build a variant's model once, tiny, before anything is trained, and hold its declared counts
against what was built.

A variant declares its weights, gains and FLOPs by hand (`models.catalog.sites.Variant`); a
slip there
silently moves the arm on the scaling law's N and C axes. A variant that cannot build (a missing
init rule, a shape error in its module) would otherwise fail every cell of a study at its first
step. `build_problems` builds the models in a fresh process (megatron's global state and the CPU
adapter stay out of the caller), counts its parameters and one forward pass's matmul FLOPs
(torch's FLOP counter), and raises ValueError naming the variant, its file and line, or the
count that differs.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import traceback
from typing import Any

from foundation.process.quiet import silence_known_warnings, verbose
from models import accounting
from models.catalog.variants import load_variant, module_origin, variant_module
from models.config import ModelConfig

FLOPS_RTOL = 0.02  # the declared forward FLOPs of the whole model, against torch's counter


def _build_and_count(config: ModelConfig) -> dict[str, Any]:
    """In the child: the built model's parameter count and FLOPs per token, or the error. The
    process group stays up for the next build; it ends with the child."""
    try:
        import torch  # lazy: the child process is the only one that builds
        from torch.utils.flop_counter import FlopCounterMode

        from models.build import build_gpt  # lazy: imports megatron-core

        model = build_gpt(config, seed=0)
        num_params = sum(p.numel() for p in model.parameters())
        tokens = torch.randint(0, config.vocab_size, (1, config.seq_length))
        positions = torch.arange(config.seq_length).unsqueeze(0)
        counter = FlopCounterMode(display=False)
        with counter, torch.no_grad():  # forward only: the accounting's training = 3 x forward
            model(tokens, positions, None, labels=tokens)
        return {"params": num_params, "forward_flops": counter.get_total_flops() / tokens.numel()}
    except Exception as err:  # noqa: BLE001 - reported to the parent as text, with its frames
        frames = [(f.filename, f.lineno) for f in traceback.extract_tb(err.__traceback__)]
        where = getattr(err, "where", None)  # `models.init.MissingInitRule`: the user's line
        frames = [tuple(where)] if where else frames
        last = traceback.format_exception_only(type(err), err)[-1].strip()
        return {"error": last, "frames": frames}


def _where(frames: list[tuple[str, int]], name: str) -> str:
    """`` at FILE:LINE``: the deepest frame in the variant's own file, else the deepest frame."""
    module = variant_module(name)
    own = module.replace(".", os.sep) + ".py" if module else None
    for filename, line in reversed(frames):
        if own and filename.endswith(own):
            return f", at {filename}:{line}"
    return f", at {frames[-1][0]}:{frames[-1][1]}" if frames else ""


def build_problems(arms: list[tuple[ModelConfig, str]]) -> list[str | None]:
    """For each (config, arm name): None when it builds with the counts it declares, else what
    is wrong (the variant's file and line, or the two counts). All are built, one after the
    other, in one child process on CPU (megatron's globals stay there)."""
    if not arms:
        return []
    # a spawned child starts with no warning filters: it silences megatron's import-time ones as
    # the command did, unless the command is verbose
    quiet = None if verbose() else silence_known_warnings
    with mp.get_context("spawn").Pool(1, initializer=quiet) as pool:
        built = pool.map(_build_and_count, [config for config, _ in arms])
    return [_problem(config, arm, one) for (config, arm), one in zip(arms, built, strict=True)]


def check_build(config: ModelConfig, arm: str) -> None:
    """ValueError when `config` does not build or its declared counts miss the built model's."""
    problem = build_problems([(config, arm)])[0]
    if problem is not None:
        raise ValueError(problem)


def _problem(config: ModelConfig, arm: str, built: dict[str, Any]) -> str | None:
    name = config.query_variant
    if "error" in built:  # the variant's file always, even when the error is raised elsewhere
        return (
            f"variant {arm!r} ({_file(name)}): building its model failed: {built['error']}"
            f"{_where(built['frames'], name)}"
        )
    declared = accounting.num_params(config)
    if built["params"] != declared:
        return (
            f"variant {arm!r}: it declares {declared:,} parameters in all, the built model has "
            f"{built['params']:,} ({built['params'] - declared:+,}); fix its weights/gains "
            f"(per layer, {config.num_layers} layers) in {_file(name)}"
        )
    flops, counted = accounting.forward_flops_per_token(config), built["forward_flops"]
    if load_variant(name).flops is not None and abs(counted - flops) > FLOPS_RTOL * flops:
        return (
            f"variant {arm!r}: its model declares {flops:,} forward FLOPs per token, torch "
            f"counts {counted:,.0f} in the built model; fix its flops (forward, per layer, "
            f"2 per multiply-add) in {_file(name)}"
        )
    return None


def _file(name: str) -> str:
    module = variant_module(name)
    return module_origin(module) if module else "models/catalog/builtin_variants.py"
