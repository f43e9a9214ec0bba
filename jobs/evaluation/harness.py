"""The project's megatron GPT as an lm-evaluation-harness model (`lm_eval.api.model.LM`).

Scores text with the model a cell trained, on the study's own tokenizer (the prepared dataset's
`tokenizer.json`). Only log-likelihoods: multiple-choice and perplexity tasks work, generation
tasks are refused (`generate_until`). One process holds the whole model: tensor or pipeline
parallel layouts are refused (`check_layout`), so a cell evaluates on its data-parallel rank 0.

Tokenising a (context, continuation) pair: whitespace at the end of the context moves to the
continuation, the pair is encoded whole and the continuation is the tokens past the context's
own encoding (as the harness's Hugging Face models do), so a word is never split at the seam.
A sequence longer than the model's context keeps its last `seq_length` tokens.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from lm_eval.api.model import LM

from data_prep.manifest import load_manifest

__all__ = ["MegatronLM", "check_layout", "load_tokenizer"]

BATCH_SIZE = 16  # sequences per forward pass; right-padded (causal, so padding never leaks back)


def check_layout(tensor_parallel: int, pipeline_parallel: int) -> None:
    """Refuse a layout the wrapper cannot score with: it runs the full model in one process."""
    if tensor_parallel > 1 or pipeline_parallel > 1:
        raise ValueError(
            f"evaluation: a cell with tensor_parallel={tensor_parallel}, pipeline_parallel="
            f"{pipeline_parallel} cannot be evaluated in-job (the harness wrapper scores with "
            "the whole model in one process); remove `evaluation` from the study or use "
            "tensor_parallel: 1 and pipeline_parallel: 1 for these sizes"
        )


def load_tokenizer(data_path: str | Path) -> tuple[Any, int]:
    """(tokenizer, end-of-document id) the study's dataset was prepared with (its
    `tokenizer.json` and manifest)."""
    from tokenizers import Tokenizer

    path = Path(data_path) / "tokenizer.json"
    if not path.is_file():
        raise FileNotFoundError(f"evaluation: {path} is missing; re-run prepare-data")
    return Tokenizer.from_file(str(path)), load_manifest(data_path).eod_token_id


class MegatronLM(LM):
    """`model(input_ids [b, s], position_ids [b, s], None)` -> logits `[b, s, vocab]`."""

    def __init__(self, model: torch.nn.Module, tokenizer: Any, eod: int, seq_length: int) -> None:
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.seq_length = seq_length
        self.eod = eod
        self._device = torch.device(
            f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "cpu"
        )

    # --- lm_eval.api.model.LM -------------------------------------------------------------
    def loglikelihood(self, requests: list) -> list[tuple[float, bool]]:
        """Per (context, continuation): (log p(continuation | context), greedy match)."""
        pairs = [self._encode_pair(*req.args) for req in requests]
        return self._score(pairs)

    def loglikelihood_rolling(self, requests: list) -> list[float]:
        """Per text: its total log-likelihood, scored in windows of `seq_length` tokens, each
        token predicted once; the first is predicted from the end-of-document token."""
        out = []
        for req in requests:
            tokens = [self.eod, *self._encode(req.args[0])]
            windows = []
            for start in range(1, len(tokens), self.seq_length):
                end = min(start + self.seq_length, len(tokens))
                context_start = max(0, end - self.seq_length - 1)
                windows.append((tokens[context_start:start], tokens[start:end]))
            out.append(sum(ll for ll, _ in self._score(windows)))
        return out

    def generate_until(self, requests: list) -> list[str]:
        raise NotImplementedError(
            "evaluation: generation tasks (generate_until) are not supported by the megatron "
            "wrapper; choose log-likelihood tasks (multiple choice, perplexity)"
        )

    # --- tokens -----------------------------------------------------------------------------
    def _encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def _encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        spaces = len(context) - len(context.rstrip())
        if spaces:
            context, continuation = context[:-spaces], context[-spaces:] + continuation
        if not context:
            return [self.eod], self._encode(continuation)
        whole, head = self._encode(context + continuation), self._encode(context)
        return head, whole[len(head) :]

    # --- scoring ----------------------------------------------------------------------------
    @torch.no_grad()
    def _score(self, pairs: list[tuple[list[int], list[int]]]) -> list[tuple[float, bool]]:
        was_training = self.model.training
        self.model.eval()
        out = []
        for i in range(0, len(pairs), BATCH_SIZE):
            out += self._score_batch(pairs[i : i + BATCH_SIZE])
        self.model.train(was_training)
        return out

    def _score_batch(self, pairs: list[tuple[list[int], list[int]]]) -> list[tuple[float, bool]]:
        # each row: context + continuation minus its last token (the input), the tail is scored
        rows = [(ctx + cont)[-(self.seq_length + 1) :][:-1] for ctx, cont in pairs]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.eod, dtype=torch.int64)  # [b, s]
        for r, row in enumerate(rows):
            ids[r, : len(row)] = torch.tensor(row)
        positions = torch.arange(width).expand_as(ids).contiguous()  # [b, s]
        logits = self.model(ids.to(self._device), positions.to(self._device), None)  # [b, s, v]
        logprobs = F.log_softmax(logits.float(), dim=-1).cpu()
        out = []
        for r, (_, cont) in enumerate(pairs):
            end = len(rows[r])
            n = min(len(cont), end)  # a continuation longer than the context window: its tail
            if n == 0:
                out.append((0.0, True))
                continue
            scored = logprobs[r, end - n : end]  # [n, v]: positions predicting the continuation
            target = torch.tensor(cont)
            ll = float(scored.gather(1, target[:, None]).sum())
            greedy = bool((scored.argmax(-1) == target).all())
            out.append((ll if math.isfinite(ll) else -math.inf, greedy))
        return out
