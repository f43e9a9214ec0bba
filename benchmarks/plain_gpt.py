"""A plain single-device PyTorch GPT with the same shape and math as ``models`` ``linear``.

The benchmark's baseline: pre-LN, bias-free LayerNorm, learned positions, fused QKV, exact-GELU
MLP, tied embeddings, no dropout, causal attention through ``scaled_dot_product_attention``
(what a nanoGPT-style model uses), cross-entropy loss.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from models import ModelConfig


class _Block(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        d = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.ln_1 = nn.LayerNorm(d, bias=False)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.ln_2 = nn.LayerNorm(d, bias=False)
        self.fc = nn.Linear(d, config.ffn_size, bias=False)
        self.fc_out = nn.Linear(config.ffn_size, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(C, dim=2)
        q, k, v = (
            t.view(B, T, self.num_heads, -1).transpose(1, 2) for t in (q, k, v)
        )  # (B, nh, T, hs)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.fc_out(F.gelu(self.fc(self.ln_2(x))))


class PlainGPT(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        if config.query_variant != "linear" or config.qk_norm or config.num_query_groups:
            raise ValueError("PlainGPT: only the linear-query, multi-head shape is implemented")
        d = config.hidden_size
        self.wte = nn.Embedding(config.vocab_size, d)
        self.wpe = nn.Embedding(config.seq_length, d)
        self.blocks = nn.ModuleList(_Block(config) for _ in range(config.num_layers))
        self.ln_f = nn.LayerNorm(d, bias=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, config.init_std)

    def forward(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Mean next-token loss of ``tokens`` [B, T] against ``labels`` [B, T]."""
        T = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(T, device=tokens.device))
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # (B, T, vocab), tied
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten())
