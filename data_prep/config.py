"""Config dataclasses of the data layer: how to prepare a corpus, and how a run reads it.

`DataPrepConfig` describes one prepared directory (source, tokenizer, split); `DataConfig` is the
part of a run config that says which prepared directory to read and in which order. Both are
validated once, here, so every downstream function can trust them. Their `validate()` messages
start with the field name; `foundation.config.from_dict` puts the full dotted path in front
(`data_prep.vocab_size`, `study.data.prepare.vocab_size`, `run.data.seed`).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

__all__ = ["DataPrepConfig", "DataConfig", "BPE", "LOCAL_SUFFIXES"]

BPE = "bpe"  # `tokenizer: bpe` trains a byte-level BPE of `vocab_size` on the train split
LOCAL_SUFFIXES = (".txt", ".jsonl", ".json", ".parquet")
UINT16_VOCAB_LIMIT = 2**16  # token ids 0..65535 fit uint16


@dataclasses.dataclass
class DataPrepConfig:
    """What `prepare()` turns into a prepared directory.

    source: ``stdlib`` (the Python standard library's own ``.py`` files; offline),
      ``hf:NAME[:CONFIG][:SPLIT]`` (a Hugging Face dataset, default split ``train``), or a local
      ``.txt``/``.jsonl``/``.parquet`` file, a directory of them, or a glob. A ``.txt`` file is one
      document; ``.jsonl``/``.parquet`` rows are documents with their text in `text_field`.
    tokenizer: ``bpe`` trains a byte-level BPE of `vocab_size` on the train split and saves it as
      ``tokenizer.json``; anything else is a Hugging Face tokenizer name (``gpt2``), a directory
      holding ``tokenizer.json``, or that file.
    """

    source: str = "stdlib"
    output_dir: str = "data/stdlib"
    text_field: str = "text"
    tokenizer: str = BPE
    vocab_size: int = 4096
    tokenizer_train_bytes: int = 50_000_000  # BPE trains on at most this much train text
    eod_token: str | None = None  # None: <|endoftext|>, </s>, <eos> or <|end_of_text|>
    dtype: Literal["auto", "uint16", "int32"] = "auto"  # auto: uint16 when the vocab fits
    validation_fraction: float = 0.01  # of documents, drawn per document with split_seed
    split_seed: int = 1234
    num_proc: int = 1  # tokeniser processes; 1 = in-process (tokenizers still uses all cores)
    streaming: bool = False  # read hf:/jsonl/parquet lazily instead of loading them first
    max_documents: int | None = None  # keep the first N documents (tests, CPU demos)
    max_bytes: int | None = None  # stop after this many bytes of text (tests, CPU demos)

    def validate(self) -> None:
        if not self.source:
            raise ValueError("source: empty; use stdlib, hf:NAME[:CONFIG][:SPLIT] or a path")
        if self.source.startswith("hf:") and not self.source[3:].split(":")[0]:
            raise ValueError(f"source: {self.source!r} lacks a dataset name; e.g. hf:openwebtext")
        if not self.output_dir:
            raise ValueError("output_dir: empty; name the directory to write")
        if not self.text_field:
            raise ValueError("text_field: empty; name the column that holds the text")
        if self.tokenizer == BPE and not 257 <= self.vocab_size <= 2**31 - 1:
            raise ValueError(
                f"vocab_size: {self.vocab_size} cannot hold the 256 byte symbols plus "
                "the end-of-document token; use e.g. 4096"
            )
        if (
            self.tokenizer == BPE
            and self.dtype == "uint16"
            and self.vocab_size > UINT16_VOCAB_LIMIT
        ):
            raise ValueError(
                f"dtype: uint16 cannot hold a vocab of {self.vocab_size} "
                f"(max {UINT16_VOCAB_LIMIT}); use dtype int32 or auto"
            )
        if self.tokenizer_train_bytes <= 0:
            raise ValueError("tokenizer_train_bytes: must be positive; e.g. 50000000")
        if not 0.0 < self.validation_fraction < 1.0:
            raise ValueError(
                f"validation_fraction: {self.validation_fraction} must be in (0, 1); e.g. 0.01"
            )
        if self.num_proc < 1:
            raise ValueError(f"num_proc: {self.num_proc} must be >= 1")
        for name in ("max_documents", "max_bytes"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name}: {value} must be >= 1, or null for no limit")

    def identity(self) -> dict:
        """The fields that decide the prepared data (not where it goes, nor how fast)."""
        data = dataclasses.asdict(self)
        for name in ("output_dir", "num_proc", "streaming"):
            data.pop(name)
        return data


@dataclasses.dataclass
class DataConfig:
    """The data part of a run config: which prepared directory, in which order.

    `seed` fixes the order of training samples (and nothing else), so runs that share it see
    identical batches whatever their variant; `val_seed` and `num_val_windows` fix the validation
    windows every run of a study is evaluated on. `num_select_windows` adds a second,
    disjoint fixed set used only to choose learning rates (0: none, the old behaviour).
    """

    path: str = "data/stdlib"
    seed: int = 1234
    num_val_windows: int = 64
    val_seed: int = 0
    num_select_windows: int = 0

    def validate(self) -> None:
        if not self.path:
            raise ValueError("path: empty; point it at a directory made by prepare-data")
        if self.num_val_windows < 1:
            raise ValueError(f"num_val_windows: {self.num_val_windows} must be >= 1")
        if self.num_select_windows < 0:
            raise ValueError(
                f"num_select_windows: {self.num_select_windows} must be >= 0 (0: no selection set)"
            )
        for name in ("seed", "val_seed"):
            if not 0 <= getattr(self, name) < 2**32:
                raise ValueError(f"{name}: {getattr(self, name)} must be in [0, 2**32)")

    def windows_fit_problem(self, seq_length: int, num_valid_tokens: int) -> str:
        """Why the loss and select windows (disjoint, ``seq_length + 1`` tokens each) do not fit
        in ``num_valid_tokens`` validation tokens, naming the field and the fixes; "" if they do."""
        available = num_valid_tokens // (seq_length + 1)
        if self.num_val_windows + self.num_select_windows <= available:
            return ""
        field = "num_select_windows" if self.num_select_windows else "num_val_windows"
        sets = f"{self.num_val_windows} windows"
        if self.num_select_windows:
            sets = (
                f"{self.num_val_windows} loss + {self.num_select_windows} select windows (disjoint)"
            )
        return (
            f"data.{field}: {sets} of {seq_length + 1} tokens do not fit in the "
            f"{num_valid_tokens} validation tokens of {self.path} (at most {available}); lower "
            "num_val_windows or num_select_windows, shorten seq_length, or prepare with a larger "
            "validation_fraction"
        )
