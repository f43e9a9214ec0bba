"""Which training samples each rank reads at each step, and how a window becomes model inputs.

Sample order is a pure function of (step, DP rank, micro-batch): step `s` reads global samples
`[s*G, (s+1)*G)` of the dataset (G sequences per step); DP rank `r` takes the r-th contiguous
slice of G/DP and cuts it into micro-batches. So the data position of a checkpoint is just its
step, and any DP x micro-batch split of the same global batch sees the same sequences.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["step_microbatches", "split_window", "as_tokens"]


def as_tokens(item: Any) -> torch.Tensor:
    """A dataset item (tensor, array or {"tokens": ...}) as an int64 tensor [seq + 1]."""
    if isinstance(item, dict):
        item = item["tokens"]
    return torch.as_tensor(item, dtype=torch.int64)


def step_microbatches(
    dataset: Any,
    step: int,
    global_batch_sequences: int,
    dp_rank: int,
    dp_size: int,
    micro_batch_size: int,
) -> list[torch.Tensor]:
    """This DP rank's micro-batches for `step`: a list of LongTensor [micro_batch, seq + 1]."""
    per_rank = global_batch_sequences // dp_size
    start = step * global_batch_sequences + dp_rank * per_rank
    out = []
    for first in range(start, start + per_rank, micro_batch_size):
        rows = [as_tokens(dataset[i]) for i in range(first, first + micro_batch_size)]
        out.append(torch.stack(rows))  # [micro_batch, seq + 1]
    return out


def split_window(window: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """[b, seq + 1] tokens -> (input_ids [b, seq], position_ids [b, seq], labels [b, seq])."""
    input_ids = window[:, :-1].contiguous()
    labels = window[:, 1:].contiguous()
    positions = torch.arange(input_ids.shape[1], dtype=torch.int64).expand_as(input_ids)
    return input_ids, positions.contiguous(), labels
