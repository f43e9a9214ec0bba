"""The paper's 124M training config, typed by hand from its published recipe (FACTS.md: the
reference nanoGPT fork's `train.py` and its GPT-3 small config). Numbers only; nothing fetched.

`tests/scaling/spec/test_paper_config.py` checks the shipped `studies/paper-124m.yaml` against
them field by field.
"""

PAPER_124M = {
    # model (GPT-3 small / GPT-2 124M shape)
    "n_layer": 12,
    "n_head": 12,
    "n_embd": 768,
    "block_size": 1024,  # context
    "vocab_size": 50304,  # GPT-2's 50257 padded to a multiple of 64
    "bias": False,
    "tie_weights": True,
    "query_mode": "residual_gelu",  # the nonlinear query
    "attention_scale_ratio": 0.5,  # scale = 0.5 / sqrt(head_size) for residual_gelu / identity
    # batch: 12 sequences x 1024 tokens x 5 accumulation steps x 8 GPUs
    "batch_size": 12,
    "gradient_accumulation_steps": 40,  # 5 per GPU x 8 GPUs
    "num_gpus": 8,
    # optimiser
    "learning_rate": 8e-4,  # the nonlinear query's headline run
    "beta1": 0.9,
    "beta2": 0.95,
    "eps": 1e-8,  # torch AdamW's default, which train.py does not change
    "weight_decay": 0.1,  # on p.dim() >= 2 only
    "grad_clip": 1.0,
    # schedule
    "warmup_iters": 2000,  # lr * (it + 1) / (warmup_iters + 1)
    "max_iters": 60002,
    "lr_decay_iters": 60002,  # = max_iters
    "min_lr_ratio": 0.1,  # min_lr = learning_rate / 10
    "dtype": "bfloat16",
}
