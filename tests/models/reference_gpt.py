"""The paper's GPT written from its formula in plain PyTorch, saving reference-style checkpoints.

Module and parameter names follow the reference nanoGPT fork (FACTS.md), so its state dict is
what ``models.import_nanogpt`` reads. Only for tests: it is the independent implementation the
imported megatron model must agree with.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, d: int, num_heads: int, query_mode: str):
        super().__init__()
        self.num_heads, self.query_mode = num_heads, query_mode
        # original: Q;K;V, else K;V (the query is built from x)
        self.c_attn = nn.Linear(d, (3 if query_mode == "original" else 2) * d, bias=False)
        self.c_proj = nn.Linear(d, d, bias=False)
        if query_mode == "residual_gelu":
            self.residual_rmsnorm_input = nn.RMSNorm(d, eps=1e-5)
            self.residual_in = nn.Linear(d, d // 2, bias=False)
            self.residual_out = nn.Linear(d // 2, d, bias=False)
            self.residual_layernorm_output = nn.LayerNorm(d, eps=1e-5, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        hd = C // self.num_heads
        if self.query_mode == "original":
            q, k, v = self.c_attn(x).split(C, dim=2)
            scale = 1 / math.sqrt(hd)
        else:
            k, v = self.c_attn(x).split(C, dim=2)
            q = x
            if self.query_mode == "residual_gelu":
                h = F.gelu(self.residual_in(self.residual_rmsnorm_input(x)))
                q = x + self.residual_layernorm_output(self.residual_out(h))
            scale = 1 / (2 * math.sqrt(hd))  # the reference halves the scale instead of q / 2
        q, k, v = (
            t.view(B, T, self.num_heads, hd).transpose(1, 2) for t in (q, k, v)
        )  # (B, nh, T, hd)
        att = (q @ k.transpose(-2, -1)) * scale
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, d: int, num_heads: int, query_mode: str, mlp_hidden: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d, eps=1e-5, bias=False)
        self.attn = CausalSelfAttention(d, num_heads, query_mode)
        self.ln_2 = nn.LayerNorm(d, eps=1e-5, bias=False)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(d, mlp_hidden, bias=False)
        self.mlp.c_proj = nn.Linear(mlp_hidden, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x))))


class ReferenceGPT(nn.Module):
    def __init__(self, args: dict):
        super().__init__()
        d = args["n_embd"]
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(args["vocab_size"], d),
                wpe=nn.Embedding(args["block_size"], d),
                h=nn.ModuleList(
                    Block(d, args["num_heads"], args["query_mode"], args["mlp_hidden_size"])
                    for _ in range(args["n_layer"])
                ),
                ln_f=nn.LayerNorm(d, eps=1e-5, bias=False),
            )
        )
        self.lm_head = nn.Linear(d, args["vocab_size"], bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied
        with torch.no_grad():
            for p in self.parameters():
                if p.dim() == 2:
                    p.normal_(0.0, 0.02)
                else:  # non-trivial norm gains, so a dropped or misplaced norm shows
                    p.copy_(1.0 + 0.3 * torch.randn_like(p))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.shape[1]
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(T))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))  # (B, T, vocab)


def model_args(query_mode: str, **overrides) -> dict:
    args = dict(
        n_layer=2,
        num_heads=4,
        n_embd=32,
        head_size=8,
        block_size=16,
        vocab_size=64,
        mlp_hidden_size=128,
        query_mode=query_mode,
        bias=False,
        tie_weights=True,
        scale=None,
    )
    return {**args, **overrides}
