"""The trajectory comparison's setup, shared by its test and its benchmark: a reference model
saved as the paper's code saves it, the project's run that starts from it, the token batches in
the reference's order, and the reference loop's losses on them.

`tests/jobs/loop/test_trajectory.py` holds the project's trainer to these losses within 1e-4
(fp32, CPU); `benchmarks/trajectory_check.py` (part of `scripts/gpu_check.sh`) holds a bf16 GPU
run to them. `steps` is 50 for both, except the CPU path check of `gpu_check.sh --tiny`, which
proves the benchmark's wiring in fewer steps (the 50-step fp32 claim is the test's).
"""

from __future__ import annotations

import math

import torch

from jobs.testing import tiny_run_dict
from tests.models.reference_gpt import ReferenceGPT, model_args
from tests.models.reference_train import Recipe, train_steps

__all__ = [
    "MODES",
    "RTOL",
    "STEPS",
    "reference_checkpoint",
    "reference_losses",
    "run_dict",
    "step_batches",
]

STEPS = 50
SEQ, D, HEADS, LAYERS = 32, 64, 4, 2
MICRO_BATCH, NUM_MICRO = 2, 2  # per DP rank: 2 micro-batches of accumulation
RTOL = 1e-4
# the paper's recipe at a tiny size: betas (0.9, 0.95), wd 0.1 on 2-D weights, clip 1.0,
# warmup over (W + 1), cosine to lr / 10 at the last step
PEAK_LR, WARMUP = 3e-3, 10
MODES = {"linear": "original", "nonlinear": "residual_gelu"}


def reference_checkpoint(folder, variant: str, vocab: int) -> tuple[str, dict]:
    """A reference model with non-trivial norm gains, saved as the paper's code saves it."""
    torch.manual_seed(7)
    head = D // HEADS
    scale = (1.0 if variant == "linear" else 0.5) / math.sqrt(head)
    args = model_args(
        MODES[variant], n_layer=LAYERS, num_heads=HEADS, n_embd=D, head_size=head,
        block_size=SEQ, vocab_size=vocab, mlp_hidden_size=4 * D, scale=scale,
    )  # fmt: skip
    model = ReferenceGPT(args)
    path = folder / f"{variant}.pt"
    torch.save({"model": model.state_dict(), "model_args": args}, path)
    return str(path), args


def run_dict(
    folder, data_dir, variant: str, init: str, dp: int, engine: str, steps: int = STEPS
) -> dict:
    """The project's run from the reference weights `init`: the recipe above, fp32, `dp` ranks
    on `engine` ("megatron", or "zero1" for DeepSpeed ZeRO-1)."""
    extra = {"engine": "deepspeed", "deepspeed": {"zero_stage": 1}} if engine != "megatron" else {}
    return tiny_run_dict(
        folder / f"{engine}-{variant}",
        data_dir,
        model={"query_variant": variant, "seq_length": SEQ, "hidden_size": D,
               "num_attention_heads": HEADS, "num_layers": LAYERS},
        train={"steps": steps, "global_batch_tokens": dp * NUM_MICRO * MICRO_BATCH * SEQ,
               "micro_batch_size": MICRO_BATCH},
        optimizer={"lr": PEAK_LR, "beta1": 0.9, "beta2": 0.95, "weight_decay": 0.1,
                   "grad_clip": 1.0},
        schedule={"kind": "cosine", "warmup_steps": WARMUP, "min_lr_ratio": 0.1,
                  "warmup_divisor": "steps_plus_one"},
        parallel={"data_parallel": dp},
        precision="fp32",
        init_weights=init,
        **extra,
    )  # fmt: skip


def step_batches(run: dict, dp: int) -> list[list[torch.Tensor]]:
    """Each step's micro-batches in the order the reference accumulates them: DP rank 0's, then
    rank 1's (the same global batch the trainer splits over its ranks)."""
    from data_prep import training_dataset
    from foundation.config import from_dict
    from jobs.config import RunConfig
    from jobs.engines.batches import step_microbatches

    config = from_dict(RunConfig, run, where="run")
    steps = config.train.steps
    dataset = training_dataset(config.data, SEQ, steps * config.global_batch_sequences)
    return [
        [
            mb
            for rank in range(dp)
            for mb in step_microbatches(
                dataset, step, config.global_batch_sequences, rank, dp, MICRO_BATCH
            )
        ]
        for step in range(steps)
    ]


def reference_losses(args: dict, path: str, batches) -> tuple[list[float], list[float]]:
    """The reference loop's per-step losses and gradient norms over `batches` (one entry a
    step), from the weights saved at `path`."""
    model = ReferenceGPT(args)
    model.load_state_dict(torch.load(path, weights_only=True)["model"])
    # cosine to min_lr at the last step, as the project's schedule ends
    recipe = Recipe(PEAK_LR, PEAK_LR / 10, WARMUP, lr_decay_iters=len(batches) - 1)
    return train_steps(model, batches, recipe)
