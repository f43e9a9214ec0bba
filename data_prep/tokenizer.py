"""Tokenizers: a Hugging Face tokenizer by name or path, or a byte-level BPE trained here.

Everything is a `tokenizers.Tokenizer` (the Rust library, no `transformers`), so the same object
encodes in `prepare()` and decodes in tests, and its JSON can be shipped to worker processes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from data_prep.config import BPE, DataPrepConfig

__all__ = [
    "EOD_CANDIDATES",
    "train_bpe",
    "load_pretrained",
    "eod_token_id",
    "describe_pretrained",
    "save_tokenizer",
]

EOD_CANDIDATES = ("<|endoftext|>", "</s>", "<eos>", "<|end_of_text|>", "<|eot_id|>")
BPE_EOD = "<|endoftext|>"


def train_bpe(texts: Iterable[str], vocab_size: int) -> Tokenizer:
    """Byte-level BPE (GPT-2 style): every byte is a symbol, so any text round-trips exactly."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[BPE_EOD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def save_tokenizer(tokenizer: Tokenizer, path: Path) -> None:
    """`tokenizer.save`, whose I/O failures (a plain Exception from Rust, "... (os error 28)")
    are raised as the OSError they are, so callers can tell a full disk from a bug."""
    try:
        tokenizer.save(str(path))
    except Exception as err:
        code = re.search(r"\(os error (\d+)\)", str(err))
        if code is None:
            raise
        raise OSError(int(code[1]), os.strerror(int(code[1])), str(path)) from err


def load_pretrained(name_or_path: str) -> Tokenizer:
    """A `tokenizer.json` file, a directory holding one, or a Hub repo (through the HF cache)."""
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return Tokenizer.from_file(str(path))
    if path.is_dir():
        if not (path / "tokenizer.json").is_file():
            raise ValueError(
                f"data_prep.tokenizer: {path} has no tokenizer.json; point at a directory saved "
                "by a Hugging Face fast tokenizer, or at the file itself"
            )
        return Tokenizer.from_file(str(path / "tokenizer.json"))
    if name_or_path.startswith((".", "/", "~")) or name_or_path.endswith(".json"):
        raise ValueError(f"data_prep.tokenizer: {name_or_path} does not exist; check the path")

    from huggingface_hub import hf_hub_download, is_offline_mode
    from huggingface_hub.errors import (
        EntryNotFoundError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
    )

    try:
        file = hf_hub_download(name_or_path, "tokenizer.json")
    except LocalEntryNotFoundError as err:
        if is_offline_mode():
            raise ValueError(
                f"data_prep.tokenizer: {name_or_path!r} is not in the Hugging Face cache and "
                "HF_HUB_OFFLINE is set. Either point tokenizer at a local tokenizer.json (or a "
                "directory with one), or fill the cache on a machine with hub access "
                f"(`hf download {name_or_path} tokenizer.json`) and share HF_HOME, or use "
                "tokenizer: bpe to train one on the corpus"
            ) from err
        raise ValueError(
            f"data_prep.tokenizer: could not reach the Hugging Face hub for {name_or_path!r} and "
            f"it is not cached ({err.__class__.__name__}). Check network/proxy (HF_ENDPOINT), or "
            "point tokenizer at a local tokenizer.json, or use tokenizer: bpe"
        ) from err
    except (RepositoryNotFoundError, EntryNotFoundError) as err:
        raise ValueError(
            f"data_prep.tokenizer: {name_or_path!r} has no tokenizer.json on the hub (not a fast "
            "tokenizer, or no such repo); give a local tokenizer.json or use tokenizer: bpe"
        ) from err
    return Tokenizer.from_file(file)


def eod_token_id(tokenizer: Tokenizer, config: DataPrepConfig) -> tuple[str, int]:
    """The end-of-document token appended after every document, and its id."""
    if config.tokenizer == BPE:
        candidates: tuple[str, ...] = (BPE_EOD,)
    elif config.eod_token is not None:
        candidates = (config.eod_token,)
    else:
        candidates = EOD_CANDIDATES
    for token in candidates:
        token_id = tokenizer.token_to_id(token)
        if token_id is not None:
            return token, token_id
    raise ValueError(
        f"data_prep.eod_token: the tokenizer has none of {', '.join(candidates)}; set eod_token to "
        "its end-of-document token"
    )


def describe_pretrained(tokenizer: Tokenizer) -> int:
    """Vocab size including added tokens: the id range the model's embedding must cover."""
    return tokenizer.get_vocab_size(with_added_tokens=True)
