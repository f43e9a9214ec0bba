"""Inference cost of a model, measured: prefill throughput, KV-cache decode latency, memory.

Per model (one arm at one size), on the device it lives on:

- ``prefill_tok_s``: prompt tokens per second of one forward over ``prefill_batch`` prompts of
  ``prompt_len`` tokens that fills the KV cache (`models.decode.Decoder.prefill`);
- ``decode_ms_b1`` / ``decode_ms_b32``: milliseconds per decode step with the cache, at batch 1
  and 32 (one step gives every sequence of the batch one new token), ``decode_steps`` steps
  after a ``prompt_len`` prompt;
- ``peak_mem_mb``: on a GPU, what the batch-32 prefill + decode holds at its peak (CUDA
  ``max_memory_allocated`` above what was allocated before, plus the model's own weights); on
  CPU an estimate: the weights plus the batch-32 KV cache buffers (``memory_kind`` says which;
  activations are not counted on CPU);
- ``kv_cache_mb``: the batch-32 KV cache buffers (`models.decode.Decoder`: ``[max_len, batch,
  query groups, head_dim]`` keys and values per layer), on any device: it follows the arm's
  ``num_query_groups``.

Timing: ``warmup`` untimed rounds, then ``repeats`` timed rounds. Within a round each timed
figure repeats its operation until it has run ``min_time_s`` on the clock (a tiny model's
prefill takes a millisecond, where the clock's and the scheduler's jitter would be the
figure). The clock: wall time on a GPU (after a synchronize); on CPU with one intra-op thread
the process's CPU time (``time.process_time``), which other processes' load on a shared machine
disturbs far less than wall time and which equals the compute time of a one-thread process;
on CPU with more threads wall time (CPU time would add the threads up).
`measure_built` measures its models side by side: round r of every model runs before any
model's round r + 1, in ABBA order (forward in even rounds, backward in odd ones), so drifting
load and the order within a round hit all arms alike. Each model keeps its per-round figures
(``rounds``), so the analysis can pair round r of an arm with round r of its baseline and state
how far the repeats agree (`analysis.stats.inference`); the figure itself is their median.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Any

__all__ = [
    "InferenceSettings",
    "measure",
    "measure_built",
    "measurement_seconds",
    "FIGURES",
    "TIMED",
]

FIGURES = ("prefill_tok_s", "decode_ms_b1", "decode_ms_b32", "peak_mem_mb", "kv_cache_mb")
TIMED = ("prefill_tok_s", "decode_ms_b1", "decode_ms_b32")  # one value per round each
DECODE_BATCHES = (1, 32)
MAX_CALLS = 64  # a timed figure repeats its operation at most this often per round


@dataclass(frozen=True)
class InferenceSettings:
    """How long a measurement runs; `for_seq_length` picks defaults that fit the model."""

    prompt_len: int
    decode_steps: int
    prefill_batch: int = 8
    warmup: int = 1
    repeats: int = 5
    min_time_s: float = 0.02  # each timed figure runs at least this long per round

    @classmethod
    def for_seq_length(
        cls, seq_length: int, max_decode_steps: int = 32, **overrides: Any
    ) -> InferenceSettings:
        """Half the context as the prompt, then up to `max_decode_steps` decode steps."""
        prompt = max(1, seq_length // 2)
        steps = max(1, min(max_decode_steps, seq_length - prompt))
        return cls(**{"prompt_len": prompt, "decode_steps": steps, **overrides})

    def validate(self, seq_length: int) -> None:
        for name in ("prompt_len", "decode_steps", "prefill_batch", "repeats"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"inference.{name}: must be a positive integer, got {value!r}")
        if not isinstance(self.warmup, int) or self.warmup < 0:
            raise ValueError(f"inference.warmup: must be >= 0, got {self.warmup!r}")
        if not isinstance(self.min_time_s, int | float) or self.min_time_s < 0:
            raise ValueError(f"inference.min_time_s: must be >= 0, got {self.min_time_s!r}")
        if self.prompt_len + self.decode_steps > seq_length:
            raise ValueError(
                f"inference.prompt_len + decode_steps ({self.prompt_len} + {self.decode_steps}) "
                f"exceed the model's seq_length {seq_length}; shorten them"
            )


def _sync(cuda: bool) -> None:
    if cuda:
        import torch

        torch.cuda.synchronize()


def _clock(cuda: bool) -> Any:
    import torch

    return time.process_time if not cuda and torch.get_num_threads() == 1 else time.perf_counter


def _round(model: Any, settings: InferenceSettings, tokens: Any, cuda: bool) -> dict[str, float]:
    """One timed round of one model: prefill, then decode at each batch size, each repeated
    until it has run `settings.min_time_s` (at most `MAX_CALLS` times)."""
    # lazy: torch, paid only when a measurement runs
    from models.decode import Decoder

    clock = _clock(cuda)
    s = settings
    out: dict[str, float] = {}
    max_len = s.prompt_len + s.decode_steps
    decoder = Decoder(model, s.prefill_batch, max_len)
    prompt = tokens[: s.prefill_batch, : s.prompt_len]
    spent, calls = 0.0, 0
    while calls == 0 or (spent < s.min_time_s and calls < MAX_CALLS):
        _sync(cuda)
        start = clock()
        decoder.prefill(prompt)
        _sync(cuda)
        spent, calls = spent + clock() - start, calls + 1
    out["prefill_tok_s"] = calls * s.prefill_batch * s.prompt_len / max(spent, 1e-9)
    del decoder
    for batch in DECODE_BATCHES:
        decoder = Decoder(model, batch, max_len)
        spent, calls = 0.0, 0
        while calls == 0 or (spent < s.min_time_s and calls < MAX_CALLS):
            decoder.prefill(tokens[:batch, : s.prompt_len])  # untimed: the cache to decode from
            _sync(cuda)
            start = clock()
            for i in range(s.decode_steps):
                decoder.step(tokens[:batch, s.prompt_len + i])
            _sync(cuda)
            spent, calls = spent + clock() - start, calls + 1
        out[f"decode_ms_b{batch}"] = 1000 * max(spent, 1e-9) / (calls * s.decode_steps)
        out["cache_bytes"] = _cache_bytes(decoder)  # of the last (largest) batch
        del decoder
    return out


def measurement_seconds(
    settings: InferenceSettings, token_s: float, call_s: float, peak_pass: bool = False
) -> float:
    """Wall seconds `measure_built` spends on one model, as `_round` runs it: every round
    (warm-up ones too) a prefill, then at each batch of `DECODE_BATCHES` an untimed prefill and
    `decode_steps` decode steps, each timed operation repeated until `min_time_s` (at most
    `MAX_CALLS`); then, with `peak_pass` (a GPU), one batch-32 prefill + decode for the memory.
    A forward call is priced at `call_s` plus `token_s` a token (`scaling plan` gives the
    study's `cost.step_s` and a third of a training token's time)."""
    s = settings

    def forward(tokens: int) -> float:
        return call_s + tokens * token_s

    def repeated(one: float) -> int:  # calls of `one` seconds until `min_time_s` is run
        return MAX_CALLS if one <= 0 else min(MAX_CALLS, max(1, math.ceil(s.min_time_s / one)))

    prefill = forward(s.prefill_batch * s.prompt_len)
    one_round = repeated(prefill) * prefill
    for batch in DECODE_BATCHES:
        decode = s.decode_steps * forward(batch)
        one_round += repeated(decode) * (decode + forward(batch * s.prompt_len))
    biggest = DECODE_BATCHES[-1]
    peak = forward(biggest * s.prompt_len) + s.decode_steps * forward(biggest) if peak_pass else 0.0
    return (s.warmup + s.repeats) * one_round + peak


def _cache_bytes(decoder: Any) -> float:
    pairs = decoder.context.key_value_memory_dict.values()
    return float(sum(t.numel() * t.element_size() for pair in pairs for t in pair))


def _peak_memory(
    model: Any, settings: InferenceSettings, tokens: Any, cuda: bool, cache_bytes: float
) -> float:
    """MiB held by the batch-32 prefill + decode (on CPU: weights + `cache_bytes`)."""
    import torch

    # lazy: torch, paid only when a measurement runs
    from models.decode import Decoder

    s, batch = settings, DECODE_BATCHES[-1]
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    if not cuda:
        return (weights + cache_bytes) / 2**20
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    decoder = Decoder(model, batch, s.prompt_len + s.decode_steps)
    decoder.prefill(tokens[:batch, : s.prompt_len])
    for i in range(s.decode_steps):
        decoder.step(tokens[:batch, s.prompt_len + i])
    torch.cuda.synchronize()
    held = torch.cuda.max_memory_allocated() - before
    del decoder
    return (weights + held) / 2**20


def measure_built(
    models: dict[Any, Any], settings: InferenceSettings, vocab_size: int
) -> dict[Any, dict[str, Any]]:
    """``{key: figures}`` for already built models (same device), measured side by side:
    their rounds interleaved in ABBA order (module docstring).

    Every model sees the same random tokens. Returns per key the `FIGURES` (each timed one the
    median of its rounds), ``rounds`` (``{figure: [one value per timed round]}`` for the
    `TIMED` figures, round r of every model measured together), ``device``, ``memory_kind`` and
    ``clock``.
    """
    import torch

    if not models:
        return {}
    first = next(iter(models.values()))
    device = next(first.parameters()).device
    cuda = device.type == "cuda"
    batch = max(settings.prefill_batch, *DECODE_BATCHES)
    length = settings.prompt_len + settings.decode_steps
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, vocab_size, (batch, length), generator=generator).to(device)
    rounds: dict[Any, list[dict[str, float]]] = {key: [] for key in models}
    for r in range(settings.warmup + settings.repeats):
        order = list(models) if r % 2 == 0 else list(models)[::-1]  # A B, B A, A B, ...
        for key in order:
            figures = _round(models[key], settings, tokens, cuda)
            if r >= settings.warmup:
                rounds[key].append(figures)
    name = torch.cuda.get_device_name(device) if cuda else "cpu"
    clock = "wall" if _clock(cuda) is time.perf_counter else "process CPU time"
    kind = "CUDA max allocated" if cuda else "estimate: weights + KV cache (CPU)"
    out = {}
    for key, model in models.items():
        per_round = {f: [r[f] for r in rounds[key]] for f in TIMED}
        figures: dict[str, Any] = {f: statistics.median(v) for f, v in per_round.items()}
        cache = rounds[key][0]["cache_bytes"]  # the same buffers every round
        figures["peak_mem_mb"] = _peak_memory(model, settings, tokens, cuda, cache)
        figures["kv_cache_mb"] = cache / 2**20
        figures["rounds"] = per_round
        out[key] = {**figures, "device": name, "memory_kind": kind, "clock": clock}
    return out


def measure(
    configs: dict[Any, Any],
    settings: InferenceSettings | None = None,
    *,
    bf16: bool = False,
    seed: int = 0,
) -> dict[Any, dict[str, Any]]:
    """Build each `models.ModelConfig` of ``{key: config}`` (1 process, TP = PP = 1) and
    measure them side by side (`measure_built`). bf16: weights and activations in bfloat16
    (GPU only, as the study trains)."""
    import torch

    from models.build import build_gpt  # lazy: megatron-core

    if not configs:
        return {}
    seq = min(c.seq_length for c in configs.values())
    settings = settings or InferenceSettings.for_seq_length(seq)
    settings.validate(seq)
    overrides = {"bf16": True, "params_dtype": torch.bfloat16} if bf16 else {}
    models = {
        key: build_gpt(config, seed=seed, transformer_overrides=overrides)
        for key, config in configs.items()
    }
    vocab = min(c.vocab_size for c in configs.values())
    return measure_built(models, settings, vocab)
