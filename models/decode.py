"""Incremental decoding with a KV cache, through the model's own megatron-core forward.

megatron-core 0.16.1 caches keys and values inside ``Attention`` when the model's forward gets a
``StaticInferenceContext`` (``megatron.core.inference.contexts``): each layer allocates
``[max_seq, max_batch, groups, head_dim]`` key and value buffers on its first call, writes the
new positions at ``sequence_len_offset`` and attends over everything cached so far. Nothing here
reimplements attention: every variant's query module (``SeparateQueryAttention``, the
nonlinear ``(X + f(X)) / 2`` included) runs inside that forward and sees only the new tokens,
as in serving. Learned positions come from the ``position_ids`` passed in; rotary positions are
sliced by megatron at the cache offset.

``Decoder(model, batch, max_len)``: ``prefill(tokens)`` then ``step(next_tokens)`` repeatedly;
both return full-vocabulary float32 logits. The model must be the whole model in this process
(pipeline_parallel = 1) and is run in eval mode without gradients.
"""

from __future__ import annotations

import torch

__all__ = ["Decoder", "generate_logits"]


class Decoder:
    """One KV cache for `batch` sequences of at most `max_len` tokens (prompt + generated)."""

    def __init__(self, model: torch.nn.Module, batch: int, max_len: int):
        # lazy: megatron-core loads with the model, not with `models`
        from megatron.core.inference.contexts import StaticInferenceContext

        if not (getattr(model, "pre_process", True) and getattr(model, "post_process", True)):
            raise ValueError("Decoder: model is one pipeline stage; needs pipeline_parallel = 1")
        if batch < 1 or max_len < 1:
            raise ValueError(f"Decoder: batch ({batch}) and max_len ({max_len}) must be >= 1")
        limit = getattr(getattr(model, "embedding", None), "position_embeddings", None)
        if limit is not None and max_len > limit.num_embeddings:
            raise ValueError(
                f"Decoder: max_len {max_len} exceeds the model's learned positions "
                f"({limit.num_embeddings}, seq_length); decode at most seq_length tokens"
            )
        self.model = model
        self.batch = batch
        self.max_len = max_len
        self.device = next(model.parameters()).device
        self.context = StaticInferenceContext(batch, max_len)
        # every prefill position's logits, not only the last one (the equality check needs them)
        self.context.materialize_only_last_token_logits = False

    @property
    def length(self) -> int:
        """Tokens cached so far."""
        return self.context.sequence_len_offset

    def reset(self) -> None:
        """Forget the cached sequence (the buffers stay allocated)."""
        self.context.reset()

    def _forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.dim() != 2 or tokens.shape[0] != self.batch:
            raise ValueError(
                f"tokens: expected [batch={self.batch}, seq], got shape {tuple(tokens.shape)}"
            )
        start, n = self.context.sequence_len_offset, tokens.shape[1]
        if start + n > self.max_len:
            raise ValueError(
                f"tokens: {start} cached + {n} new exceed max_len {self.max_len}; "
                "make the Decoder with a larger max_len"
            )
        tokens = tokens.to(device=self.device, dtype=torch.long)
        positions = torch.arange(start, start + n, device=self.device).expand_as(tokens)
        self.model.eval()
        with torch.no_grad():
            # megatron gathers the vocab slices of every TP rank itself in inference
            out = self.model(
                tokens,
                positions,
                None,
                inference_context=self.context,
                runtime_gather_output=True,
            )
        self.context.sequence_len_offset += n
        return out.float()  # [b, n, vocab]

    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        """Run the prompt ``[batch, seq]`` through the model, filling the cache; its logits."""
        self.reset()
        return self._forward(tokens)

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """One decode step: ``tokens`` ``[batch]`` -> logits ``[batch, vocab]``."""
        if self.length == 0:
            raise ValueError("step: nothing cached; call prefill(prompt) first")
        tokens = tokens.reshape(self.batch, 1)
        self.context.enable_decode_mode()
        try:
            return self._forward(tokens)[:, -1]
        finally:
            self.context.enable_prefill_mode()


def generate_logits(model: torch.nn.Module, tokens: torch.Tensor, prompt_len: int) -> torch.Tensor:
    """Logits ``[batch, seq, vocab]`` of ``tokens``: prefill the first `prompt_len` tokens, then
    decode the rest one at a time from the cache (teacher-forced). Equal to a full forward pass
    up to float rounding."""
    batch, seq = tokens.shape
    if not 1 <= prompt_len <= seq:
        raise ValueError(f"prompt_len: {prompt_len} must be between 1 and seq ({seq})")
    decoder = Decoder(model, batch, seq)
    out = [decoder.prefill(tokens[:, :prompt_len])]
    for i in range(prompt_len, seq):
        out.append(decoder.step(tokens[:, i]).unsqueeze(1))
    return torch.cat(out, dim=1)
