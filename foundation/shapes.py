"""Standard model shapes at named scales (1B, 7B) and their parameter and FLOP counts.

The analysis places named scales on its compute axis with these, instead of fitting FLOPs
against N over the measured (tiny) models: a log-log fit over 1M-100M parameters, carried to
1B, gave 1.05 FLOPs per parameter per token where the arithmetic gives about 7.

Shapes are Pythia's (Biderman et al. 2023, Table 1: 1B = 16 layers, d 2048; 6.9B = 32 layers,
d 4096; context 2048, vocabulary 50,304), a GPT-style family with a 4d MLP. The counts are the
project's own accounting (``models.accounting``) for a linear-query model of that shape, written
here as plain arithmetic so that the analysis, which imports no model code, can use them;
tests/models check that the two agree. Training FLOPs per token = 3 x forward; forward = 2 per
weight-matrix entry (the layers and the output logits) + QK^T and AV over the full context.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NamedShape:
    """A GPT-style model: tied embeddings, learned positions, 4d MLP, multi-head attention."""

    num_layers: int
    hidden_size: int
    num_attention_heads: int
    seq_length: int = 2048
    vocab_size: int = 50304
    source: str = ""

    def _layer_weights(self) -> int:
        d = self.hidden_size
        return 4 * d * d + 2 * d * (4 * d)  # W_Q, W_K, W_V, W_O; MLP d x 4d and 4d x d

    def num_nonembedding_params(self) -> int:
        """Weights and norm gains outside the embeddings (two pre-norms per layer, a final one)."""
        d = self.hidden_size
        return self.num_layers * (self._layer_weights() + 2 * d) + d

    def flops_per_token(self) -> int:
        """Training FLOPs per token: C = this x tokens, as the measured runs count it."""
        d = self.hidden_size
        weights = self.num_layers * self._layer_weights() + d * self.vocab_size
        attention = self.num_layers * 2 * 2 * self.seq_length * d
        return 3 * (2 * weights + attention)


NAMED_SHAPES: dict[str, NamedShape] = {
    "1B": NamedShape(16, 2048, 8, source="Pythia-1B"),
    "7B": NamedShape(32, 4096, 32, source="Pythia-6.9B"),
}
