"""Code run inside spawned gloo ranks by the models tests (importable, so spawn can find it)."""

from __future__ import annotations

import torch

from models import ModelConfig, ParallelConfig

SEQ, BATCH, VOCAB = 16, 2, 64


def tiny_config(**overrides) -> ModelConfig:
    base = dict(
        vocab_size=VOCAB, seq_length=SEQ, num_layers=2, hidden_size=32, num_attention_heads=4
    )
    return ModelConfig(**{**base, **overrides})


# name -> ModelConfig overrides; every query variant plus the options that change the attention.
CASES: dict[str, dict] = {
    "linear": dict(query_variant="linear"),
    "identity": dict(query_variant="identity"),
    "nonlinear": dict(query_variant="nonlinear"),
    "residual_linear": dict(query_variant="residual_linear"),
    "linear_qk_norm": dict(query_variant="linear", qk_norm=True),
    "nonlinear_gqa_rope": dict(
        query_variant="nonlinear", num_query_groups=2, position_embedding="rope"
    ),
    # a user's variant with its own init rules for a 1-D and a 3-D parameter
    "conv_own_init": dict(query_variant="tests.variants.conv_query:conv_query"),
    # sites other than the query: a gate on the attention output, a cross-layer value residual
    "output_gate": dict(query_variant="examples.site_examples:output_gate"),
    "value_residual": dict(query_variant="examples.site_examples:value_residual"),
    "swiglu": dict(query_variant="examples.site_examples:swiglu"),
    # the K/V projection replaced, the query left linear (grouped queries: whole groups per rank)
    "shared_kv": dict(query_variant="examples.site_examples:shared_kv", num_query_groups=2),
    # the core attention replaced; its lambdas and head-norm gain are shared by all heads
    "differential_attention": dict(
        query_variant="examples.differential_attention:differential_attention"
    ),
}
# every case under PP too (value_residual's layer 1 sends its values on: models.cross_stage)
PIPELINE_CASES = list(CASES)


def to_numpy(obj):
    """Tensors -> numpy arrays, recursively: torch tensors sent through a multiprocessing queue
    travel as shared-memory handles that die with the worker."""
    if torch.is_tensor(obj):
        return obj.detach().cpu().numpy()
    if isinstance(obj, dict):
        return {k: to_numpy(v) for k, v in obj.items()}
    return obj


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(7)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=gen)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def _positions() -> torch.Tensor:
    return torch.arange(SEQ).unsqueeze(0).expand(BATCH, -1)


def _gather_full(param: torch.Tensor) -> torch.Tensor:
    """Full tensor of a possibly TP-sliced parameter (or its grad), as megatron laid it out."""
    from megatron.core import parallel_state

    if not getattr(param, "tensor_model_parallel", False):
        return param.detach().clone()
    group = parallel_state.get_tensor_model_parallel_group()
    parts = [torch.empty_like(param) for _ in range(torch.distributed.get_world_size(group))]
    torch.distributed.all_gather(parts, param.detach().contiguous(), group=group)
    return torch.cat(parts, dim=param.partition_dim)


def _full_grads(model) -> dict[str, torch.Tensor]:
    out = {}
    for name, param in model.named_parameters():
        grad = param.grad
        holder = torch.nn.Parameter(grad) if grad is not None else None
        if holder is not None and getattr(param, "tensor_model_parallel", False):
            holder.tensor_model_parallel = True
            holder.partition_dim = param.partition_dim
        out[name] = _gather_full(holder) if holder is not None else None
    return out


def reference_worker(rank: int, world_size: int, cases: list[str], seed: int) -> dict:
    """One process: loss, full weights and grads of each case."""
    from models import build_gpt, logits, runtime

    tokens, labels = batch()
    results = {}
    for case in cases:
        model = build_gpt(tiny_config(**CASES[case]), seed=seed)
        loss = model(tokens, _positions(), None, labels=labels).float().mean()
        loss.backward()
        results[case] = {
            "loss": loss.item(),
            "weights": {
                k: v.detach().clone() for k, v in model.state_dict().items() if torch.is_tensor(v)
            },
            "grads": {n: p.grad.clone() for n, p in model.named_parameters()},
            "logits": logits(model, tokens),
        }
    runtime.destroy()
    return to_numpy(results)


def tensor_parallel_worker(rank: int, world_size: int, cases: list[str], seed: int) -> dict:
    """TP=world_size: same seed, so the same full weights; loss and gathered grads per case."""
    from models import build_gpt, logits, runtime

    tokens, labels = batch()
    parallel = ParallelConfig(tensor_parallel=world_size)
    results = {}
    for case in cases:
        model = build_gpt(tiny_config(**CASES[case]), parallel, seed=seed)
        loss = model(tokens, _positions(), None, labels=labels).float().mean()
        loss.backward()
        results[case] = {
            "loss": loss.item(),
            "weights": {n: _gather_full(p) for n, p in model.named_parameters()},
            "grads": _full_grads(model),
            "local_grads": {n: p.grad.clone() for n, p in model.named_parameters()},
            "logits": logits(model, tokens),  # vocab slices gathered over TP
        }
    runtime.destroy()
    return to_numpy(results)


def _stage_key(name: str, layer_offset: int) -> str:
    """Name of a stage parameter in the 1-process model (layers are numbered per stage)."""
    parts = name.split(".")
    if parts[:2] == ["decoder", "layers"]:
        parts[2] = str(int(parts[2]) + layer_offset)
    return ".".join(parts)


def pipeline_worker(rank: int, world_size: int, cases: list[str], seed: int) -> dict:
    """PP=world_size through megatron's schedule, built with ``seed`` (no weights loaded)."""
    from megatron.core import parallel_state
    from megatron.core.pipeline_parallel import get_forward_backward_func

    from models import build_gpt, cross_stage, runtime

    tokens, labels = batch()
    parallel = ParallelConfig(pipeline_parallel=world_size)
    results = {}
    for case in cases:
        config = tiny_config(**CASES[case])
        model = build_gpt(config, parallel, seed=seed)
        offset = parallel_state.get_pipeline_model_parallel_rank() * (
            config.num_layers // world_size
        )
        weights = {_stage_key(n, offset): p.detach().clone() for n, p in model.named_parameters()}

        def forward_step(data_iterator, model):
            tok, lab = next(data_iterator)
            pos = torch.arange(tok.shape[1]).unsqueeze(0).expand(tok.shape[0], -1)
            output = model(tok, pos, None, labels=lab)

            def loss_func(output_tensor):
                loss = output_tensor.float().mean()
                return loss, {"loss": loss.detach()}

            return output, loss_func

        losses = get_forward_backward_func()(
            forward_step_func=forward_step,
            data_iterator=iter([(tokens, labels)]),
            model=[model],
            num_microbatches=1,
            seq_length=SEQ,
            micro_batch_size=BATCH,
            forward_only=False,
        )
        cross_stage.finish()  # as the engine does after each schedule call
        results[case] = {
            "offset": offset,
            "weights": weights,
            "loss": losses[0]["loss"].item() if losses else None,
            "grads": {_stage_key(n, offset): p.grad.clone() for n, p in model.named_parameters()},
        }
    runtime.destroy()
    return to_numpy(results)


# The value residual across more stages and micro-batches than the PP=2 cases: 4 layers, 4
# micro-batches of one sequence (1F1B's warm-up, steady state and cool-down all run).
CROSS_STAGE_LAYERS, CROSS_STAGE_MICROBATCHES = 4, 4


def _cross_stage_batch() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(11)
    tokens = torch.randint(0, VOCAB, (CROSS_STAGE_MICROBATCHES, SEQ + 1), generator=gen)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def cross_stage_worker(rank: int, world_size: int, tp: int, pp: int, seed: int) -> dict:
    """value_residual at TP=tp, PP=pp over megatron's schedule with several micro-batches: the
    loss (last stage) and this rank's grads, gathered over TP, by one-process name."""
    from megatron.core import parallel_state
    from megatron.core.pipeline_parallel import get_forward_backward_func

    from models import build_gpt, cross_stage, runtime

    config = tiny_config(**CASES["value_residual"], num_layers=CROSS_STAGE_LAYERS)
    parallel = ParallelConfig(tensor_parallel=tp, pipeline_parallel=pp)
    model = build_gpt(config, parallel, seed=seed)
    tokens, labels = _cross_stage_batch()

    def forward_step(data_iterator, model):
        tok, lab = next(data_iterator)
        pos = torch.arange(tok.shape[1]).unsqueeze(0).expand(tok.shape[0], -1)
        output = model(tok, pos, None, labels=lab)
        return output, lambda out: (out.float().mean(), {"loss": out.float().mean().detach()})

    microbatches = [(tokens[i : i + 1], labels[i : i + 1]) for i in range(len(tokens))]
    losses = get_forward_backward_func()(
        forward_step_func=forward_step,
        data_iterator=iter(microbatches),
        model=[model],
        num_microbatches=len(microbatches),
        seq_length=SEQ,
        micro_batch_size=1,
        forward_only=False,
    )
    cross_stage.finish()
    offset = parallel_state.get_pipeline_model_parallel_rank() * (CROSS_STAGE_LAYERS // pp)
    grads = {_stage_key(n, offset): g for n, g in _full_grads(model).items()}
    loss = sum(x["loss"].item() for x in losses) / len(losses) if losses else None
    runtime.destroy()
    return to_numpy({"loss": loss, "grads": grads})


def cross_stage_reference_worker(rank: int, world_size: int, seed: int) -> dict:
    """One process: the loss and grads `cross_stage_worker` must match (mean over the batch)."""
    from models import build_gpt, runtime

    config = tiny_config(**CASES["value_residual"], num_layers=CROSS_STAGE_LAYERS)
    model = build_gpt(config, seed=seed)
    tokens, labels = _cross_stage_batch()
    positions = torch.arange(SEQ).unsqueeze(0).expand(len(tokens), -1)
    loss = model(tokens, positions, None, labels=labels).float().mean()
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    runtime.destroy()
    return to_numpy({"loss": loss.item(), "grads": grads})


# Shapes for the counting and FLOP checks: every option that changes a count appears somewhere.
COUNT_CASES: dict[str, dict] = {
    **CASES,
    "linear_untied_gqa": dict(query_variant="linear", tie_embeddings=False, num_query_groups=2),
    "linear_head_dim": dict(query_variant="linear", head_dim=12),
    "identity_rope": dict(query_variant="identity", position_embedding="rope"),
    "wider_mlp": dict(query_variant="linear", ffn_hidden_size=152),
}
FLOP_SIZES: dict[str, dict] = {
    "small": dict(num_layers=2, hidden_size=32, num_attention_heads=4, seq_length=16),
    "medium": dict(num_layers=3, hidden_size=64, num_attention_heads=4, seq_length=32),
    "large": dict(
        num_layers=2, hidden_size=128, num_attention_heads=8, seq_length=64, vocab_size=256
    ),
}


def counting_worker(rank: int, world_size: int) -> dict:
    """Built models' parameter counts, and torch's FLOP count of one training step's matmuls."""
    from torch.utils.flop_counter import FlopCounterMode

    from models import build_gpt, runtime

    counts = {}
    for case, overrides in COUNT_CASES.items():
        model = build_gpt(tiny_config(**overrides), seed=0)
        embedding = sum(
            p.numel()
            for n, p in model.named_parameters()
            if n.startswith("embedding.") or n.startswith("output_layer.")
        )
        counts[case] = (sum(p.numel() for p in model.parameters()), embedding)
    flops = {}
    for size, shape in FLOP_SIZES.items():
        for variant in ("linear", "identity", "nonlinear", "residual_linear"):
            config = tiny_config(query_variant=variant, **shape)
            model = build_gpt(config, seed=0)
            tokens = torch.randint(0, config.vocab_size, (2, config.seq_length))
            positions = torch.arange(config.seq_length).unsqueeze(0).expand(2, -1)
            counter = FlopCounterMode(display=False)
            with counter:
                model(tokens, positions, None, labels=tokens).float().mean().backward()
            flops[(size, variant)] = counter.get_total_flops() / tokens.numel()
    runtime.destroy()
    return {"counts": counts, "flops": flops}


def init_worker(rank: int, world_size: int) -> dict:
    """Initial weights of a 4-layer untied nonlinear model for seeds 0, 0 and 1."""
    from models import build_gpt, runtime

    config = tiny_config(
        query_variant="nonlinear", num_layers=4, hidden_size=64, tie_embeddings=False
    )
    out = {}
    for key, seed in (("a", 0), ("b", 0), ("c", 1)):
        model = build_gpt(config, seed=seed)
        out[key] = {n: p.detach().clone() for n, p in model.named_parameters()}
    runtime.destroy()
    return to_numpy(out)


def w2_zero_worker(rank: int, world_size: int) -> dict:
    """Max |logits(nonlinear with W2 = 0) - logits(identity with the same other weights)|."""
    from models import build_gpt, logits, runtime

    nonlinear = build_gpt(tiny_config(query_variant="nonlinear"), seed=3)
    identity = build_gpt(tiny_config(query_variant="identity"), seed=4)
    shared = dict(nonlinear.named_parameters())
    with torch.no_grad():
        for name, param in nonlinear.named_parameters():
            if name.endswith("query.linear_out.weight"):
                param.zero_()
            elif "query." in name and param.dim() == 1:
                param.normal_(1.0, 0.3)  # non-trivial gains: only W2 = 0 may switch f off
        for name, param in identity.named_parameters():
            param.copy_(shared[name])
    tokens, _ = batch()
    diff = (logits(nonlinear, tokens) - logits(identity, tokens)).abs().max().item()
    with torch.no_grad():  # control: with W2 != 0 the two must differ
        for name, param in nonlinear.named_parameters():
            if name.endswith("query.linear_out.weight"):
                param.normal_(0.0, 0.02)
    control = (logits(nonlinear, tokens) - logits(identity, tokens)).abs().max().item()
    runtime.destroy()
    return {"diff": diff, "control": control}


def import_worker(rank: int, world_size: int, checkpoints: dict[str, str]) -> dict:
    """For each saved reference checkpoint: max |our logits - reference logits|, and the config."""
    from foundation.config import to_dict
    from models import import_nanogpt, logits, runtime
    from models.config import ModelConfig  # noqa: F401 - unpickled config type

    tokens, _ = batch()
    out = {}
    for mode, path in checkpoints.items():
        model, config = import_nanogpt(path)
        expected = torch.load(path + ".logits", weights_only=True)
        out[mode] = {
            "diff": (logits(model, tokens) - expected).abs().max().item(),
            "config": to_dict(config),
            "gain_std": float(
                torch.cat([p.flatten() for n, p in model.named_parameters() if p.dim() == 1]).std()
            ),
        }
    runtime.destroy()
    return out


BUILTIN_CASES = [case for case in CASES if "." not in CASES[case]["query_variant"]]


def weights_digest(model) -> str:
    """16 hex of every parameter's name and float32 bytes, in name order."""
    import hashlib

    h = hashlib.sha256()
    for name, param in sorted(model.named_parameters()):
        h.update(name.encode())
        h.update(param.detach().float().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def variant_init_worker(rank: int, world_size: int) -> dict:
    """Step-0 weights of the built-ins (digests) and of the conv query variants (or their error)."""
    from models import build_gpt, runtime

    out: dict = {"digests": {}, "errors": {}}
    for case in BUILTIN_CASES:
        out["digests"][case] = weights_digest(build_gpt(tiny_config(**CASES[case]), seed=0))
    model = build_gpt(tiny_config(**CASES["conv_own_init"]), seed=0)
    query = model.decoder.layers[0].self_attention.query
    x = torch.randn(SEQ, BATCH, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        plain, _ = query.linear_q(x)
        out["query_minus_plain"] = (query(x) - plain).abs().max().item()
    out["weights"] = {n: p.detach().clone() for n, p in query.named_parameters()}
    tokens, labels = batch()
    for case in ("linear", "value_residual", "output_gate"):
        built = build_gpt(tiny_config(**CASES[case]), seed=0)
        loss = built(tokens, _positions(), None, labels=labels).float().mean().item()
        out.setdefault("sites", {})[case] = {
            "loss": loss,
            "weights": {n: p.detach().clone() for n, p in built.named_parameters()},
        }
    for variant in ("conv_query_without_rules", "conv_query_misspelt", "conv_query_rule_typo"):
        try:
            build_gpt(tiny_config(query_variant=f"tests.variants.conv_query:{variant}"), seed=0)
        except ValueError as err:
            out["errors"][variant] = str(err)
    runtime.destroy()
    return to_numpy(out)


def shared_kv_worker(rank: int, world_size: int) -> dict:
    """What the `linear_kv` site holds and computes in the shared-K/V example: its weight shapes
    and the largest |k - v| of layer 0's keys and values on one batch."""
    from models import build_gpt, runtime

    config = tiny_config(**CASES["shared_kv"])
    model = build_gpt(config, seed=0)
    seen = {}
    kv = model.decoder.layers[0].self_attention.linear_kv

    def keep(module, args, out) -> None:  # None: the module's output stays as it is
        seen.setdefault("kv", out[0].detach())

    kv.register_forward_hook(keep)
    tokens, labels = batch()
    model(tokens, _positions(), None, labels=labels)
    hn = config.kv_channels
    mixed = seen["kv"].view(*seen["kv"].shape[:2], config.query_groups, 2 * hn)
    key, value = torch.split(mixed, hn, dim=3)
    shapes = {n: tuple(p.shape) for n, p in model.named_parameters() if "layers.0." in n}
    runtime.destroy()
    return {"shapes": shapes, "k_minus_v": float((key - value).abs().max())}
