"""`prepare()`: documents → tokens → megatron ``.bin``/``.idx`` train/valid splits + manifest.

Crash safety: everything is written into a hidden sibling ``.NAME.tmp-PID`` and renamed into
place only after the manifest is on disk, so a directory named NAME is complete or absent. A file
lock serialises concurrent prepares of the same output; leftovers of killed runs are removed
under that lock. Idempotence: an existing output whose manifest records the same settings (and,
for stdlib/local sources, the same input files) is reused without touching it.
"""

from __future__ import annotations

import collections
import contextlib
import datetime
import hashlib
import importlib.metadata
import json
import multiprocessing as mp
import os
import platform
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from data_prep.config import BPE, UINT16_VOCAB_LIMIT, DataPrepConfig
from data_prep.manifest import (
    FORMAT_VERSION,
    MANIFEST_NAME,
    SPLITS,
    Manifest,
    file_sha256,
    load_manifest,
)
from data_prep.output import (
    check_output,
    install,
    is_empty_folder,
    output_lock,
    raise_write_fault,
    remove_stale_temps,
    replace_refusal,
    temp_dir,
    writing,
)
from data_prep.sources import Source, local_fingerprint, open_source
from data_prep.tokenizer import eod_token_id, load_pretrained, save_tokenizer, train_bpe
from foundation.config import ConfigError

__all__ = ["prepare", "is_validation_document"]

_BATCH_BYTES = 4_000_000  # text per encode_batch call: big enough to keep tokenizers' threads busy
_VERSIONED = ("megatron-core", "tokenizers", "datasets", "numpy", "torch")


def is_validation_document(index: int, seed: int, fraction: float) -> bool:
    """Document-level split: a hash of (seed, index), so it needs no count and no shared RNG."""
    digest = hashlib.blake2b(struct.pack("<QQ", seed, index), digest_size=8).digest()
    return int.from_bytes(digest, "little") < fraction * 2**64


def _preflight(out: Path, config: DataPrepConfig, force: bool) -> Manifest | None:
    """The refusals that need no lock, before anything is made: an output prepared otherwise,
    a source or tokenizer that cannot be opened. The reusable manifest, if any (a complete
    output is only ever renamed into place, so reading it needs no lock)."""
    if not force and (manifest := _reusable(out, config)) is not None:
        return manifest
    open_source(config)
    if config.tokenizer != BPE:
        tokenizer = load_pretrained(config.tokenizer)
        eod_token_id(tokenizer, config)
        _resolve_dtype(config, tokenizer.get_vocab_size(with_added_tokens=True))
    return None


def _reusable(out: Path, config: DataPrepConfig) -> Manifest | None:
    """The existing manifest if `out` was prepared with these settings; raise if it differs.

    `check_output` has refused every existing `out` that prepare did not write."""
    if not out.exists() or is_empty_folder(out):
        return None
    try:
        manifest = load_manifest(out)
    except ValueError as err:
        raise ValueError(
            f"data_prep.output_dir: {out} exists but is not a usable prepared dataset ({err}); "
            + _rebuild_hint(out)
        ) from err
    differs = sorted(
        k for k, v in config.identity().items() if manifest["config"].get(k, object()) != v
    )
    fingerprint = local_fingerprint(config)
    if fingerprint is not None and fingerprint != manifest["source"].get("fingerprint"):
        differs.append("source files (changed since it was prepared)")
    if differs:
        raise ValueError(
            f"data_prep.output_dir: {out} was prepared with different settings "
            f"({', '.join(differs)}); " + _rebuild_hint(out)
        )
    return manifest


def _rebuild_hint(out: Path) -> str:
    """The fix for a dataset that cannot be reused: --force only where --force may replace it."""
    if replace_refusal(out) is None:
        return "pass --force (force=True) to rebuild it, or choose another -o (output_dir)"
    return (
        "it holds files prepare-data did not write, so prepare-data will not rebuild it there; "
        "choose another -o (output_dir)"
    )


def _split_documents(source: Source, config: DataPrepConfig) -> Iterator[tuple[bool, str]]:
    for index, text in enumerate(source.documents()):
        yield is_validation_document(index, config.split_seed, config.validation_fraction), text


def _batches(docs: Iterator[tuple[bool, str]]) -> Iterator[tuple[list[bool], list[str]]]:
    flags: list[bool] = []
    texts: list[str] = []
    size = 0
    for is_valid, text in docs:
        flags.append(is_valid)
        texts.append(text)
        size += len(text)
        if size >= _BATCH_BYTES:
            yield flags, texts
            flags, texts, size = [], [], 0
    if texts:
        yield flags, texts


_worker_tokenizer = None


def _init_worker(tokenizer_json: str) -> None:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one core per worker process
    from tokenizers import Tokenizer

    global _worker_tokenizer
    _worker_tokenizer = Tokenizer.from_str(tokenizer_json)
    _worker_tokenizer.encode_special_tokens = True  # not serialised; see _encode


def _encode(tokenizer, texts: list[str]) -> list[list[int]]:
    # Documents are raw text: a literal "<|endoftext|>" inside one is text, not an EOD (the
    # tokenizer's `encode_special_tokens` is set), and no BOS/EOS post-processing is added; the
    # only EOD is the one appended after each document.
    return [e.ids for e in tokenizer.encode_batch_fast(texts, add_special_tokens=False)]


def _encode_in_worker(batch: tuple[list[bool], list[str]]) -> tuple[list[bool], list[list[int]]]:
    flags, texts = batch
    return flags, _encode(_worker_tokenizer, texts)


def _encoded(tokenizer, batches, num_proc: int) -> Iterator[tuple[list[bool], list[list[int]]]]:
    """Token ids per batch, in document order, from this process or `num_proc` workers."""
    if num_proc == 1:
        for flags, texts in batches:
            yield flags, _encode(tokenizer, texts)
        return
    ctx = mp.get_context("spawn")  # fork after tokenizers' threads started would deadlock
    with ctx.Pool(num_proc, initializer=_init_worker, initargs=(tokenizer.to_str(),)) as pool:
        # at most 2 batches per worker in flight (Pool.imap would read the whole corpus ahead)
        pending: collections.deque = collections.deque()
        for batch in batches:
            pending.append(pool.apply_async(_encode_in_worker, (batch,)))
            if len(pending) >= 2 * num_proc:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


def _train_tokenizer(source: Source, config: DataPrepConfig):
    def train_texts() -> Iterator[str]:
        seen = 0
        for is_valid, text in _split_documents(source, config):
            if is_valid:
                continue  # the tokenizer never sees validation text
            yield text
            seen += len(text)
            if seen >= config.tokenizer_train_bytes:
                return

    return train_bpe(train_texts(), config.vocab_size)


def _write_splits(tmp: Path, source, tokenizer, eod_id: int, dtype, config, progress) -> dict:
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    np_dtype = np.dtype(dtype).type  # megatron wants the numpy scalar type
    builders = {s: IndexedDatasetBuilder(str(tmp / f"{s}.bin"), dtype=np_dtype) for s in SPLITS}
    counts = {s: {"documents": 0, "tokens": 0} for s in SPLITS}
    text_hash = hashlib.sha256()

    def hashed_docs() -> Iterator[tuple[bool, str]]:
        for is_valid, text in _split_documents(source, config):
            text_hash.update(text.encode("utf-8", "surrogatepass") + b"\x00")
            yield is_valid, text

    split = SPLITS[0]  # the split last written to: the file a write fault names
    try:
        with _progress(progress) as bar:
            task = bar.add_task("tokenising", total=None)
            for flags, ids_batch in _encoded(tokenizer, _batches(hashed_docs()), config.num_proc):
                for is_valid, ids in zip(flags, ids_batch, strict=True):
                    split = "valid" if is_valid else "train"
                    tokens = np.asarray(ids + [eod_id], dtype=dtype)  # [len(doc) + 1]
                    builders[split].add_document(tokens, [tokens.size])
                    counts[split]["documents"] += 1
                    counts[split]["tokens"] += tokens.size
                bar.update(task, advance=len(flags))
    except OSError as err:
        raise_write_fault(err, tmp / f"{split}.bin")
        raise
    for split, builder in builders.items():
        with writing(tmp / f"{split}.idx"):  # flushes the .bin, then writes the .idx
            builder.finalize(str(tmp / f"{split}.idx"))
    for split in SPLITS:
        if counts[split]["documents"] == 0:
            raise ValueError(
                f"data_prep.validation_fraction: the {split} split got no documents out of "
                f"{sum(c['documents'] for c in counts.values())}; use more documents "
                "(max_documents/max_bytes) or a validation_fraction further from 0/1"
            )
        for kind in ("bin", "idx"):
            counts[split][f"{kind}_sha256"] = file_sha256(tmp / f"{split}.{kind}")
    return {"splits": counts, "text_sha256": text_hash.hexdigest()}


def _progress(enabled: bool):
    from rich.progress import MofNCompleteColumn, Progress, SpinnerColumn, TimeElapsedColumn

    return Progress(
        SpinnerColumn(),
        "{task.description}",
        MofNCompleteColumn(),
        "documents",
        TimeElapsedColumn(),
        disable=not enabled,
        transient=True,
    )


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in _VERSIONED:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[name] = importlib.metadata.version(name)
    return versions


def _resolve_dtype(config: DataPrepConfig, vocab_size: int) -> str:
    if config.dtype == "auto":
        return "uint16" if vocab_size <= UINT16_VOCAB_LIMIT else "int32"
    if config.dtype == "uint16" and vocab_size > UINT16_VOCAB_LIMIT:
        raise ValueError(
            f"data_prep.dtype: uint16 cannot hold the {vocab_size}-token vocab of "
            f"{config.tokenizer!r} (max {UINT16_VOCAB_LIMIT}); use dtype int32 or auto"
        )
    return config.dtype


def _fsync_tree(directory: Path) -> None:
    for path in directory.iterdir():
        with open(path, "rb") as f, writing(path):  # a full disk may show first here (NFS)
            os.fsync(f.fileno())


def prepare(config: DataPrepConfig, force: bool = False, progress: bool = False) -> Manifest:
    """Prepare `config.output_dir` (or reuse it) and return its manifest.

    Bad input (missing files, empty corpus, absent text field, unknown tokenizer, dtype too small,
    an output that prepare may not write or replace: `data_prep.output`) raises ValueError naming
    the field and the fix before anything is written. A write fault (full disk, file-size limit)
    raises `OutputWriteError` after the partial output is removed.
    """
    try:
        config.validate()
    except ValueError as err:  # a config built in code, not through from_dict: name the path
        raise ConfigError(f"data_prep.{err}") from None
    out = Path(config.output_dir).expanduser().resolve()
    check_output(out, config.source, force)  # before anything is read or written
    if (manifest := _preflight(out, config, force)) is not None:
        return manifest
    with output_lock(out):
        remove_stale_temps(out)  # left by killed runs; we hold the lock
        if not force and (manifest := _reusable(out, config)) is not None:
            return manifest
        source = open_source(config)
        tokenizer = None if config.tokenizer == BPE else load_pretrained(config.tokenizer)
        if tokenizer is not None:
            eod_token_id(tokenizer, config)  # fail on a missing EOD before writing
            _resolve_dtype(config, tokenizer.get_vocab_size(with_added_tokens=True))

        tmp = temp_dir(out)
        try:
            with writing(tmp):
                tmp.mkdir()
            if tokenizer is None:
                tokenizer = _train_tokenizer(source, config)
            vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
            dtype = _resolve_dtype(config, vocab_size)
            eod_token, eod_id = eod_token_id(tokenizer, config)
            tokenizer.encode_special_tokens = True  # see _encode
            with writing(tmp / "tokenizer.json"):
                save_tokenizer(tokenizer, tmp / "tokenizer.json")
            written = _write_splits(tmp, source, tokenizer, eod_id, dtype, config, progress)
            manifest = {
                "format": FORMAT_VERSION,
                "source": source.description,
                "config": config.identity(),
                "tokenizer": {
                    "name": config.tokenizer,
                    "file": "tokenizer.json",
                    "sha256": file_sha256(tmp / "tokenizer.json"),
                    "eod_token": eod_token,
                },
                "vocab_size": vocab_size,
                "eod_token_id": eod_id,
                "dtype": dtype,
                **written,
                "versions": _versions(),
                "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            }
            with writing(tmp / MANIFEST_NAME):
                (tmp / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2, sort_keys=True))
            _fsync_tree(tmp)
            install(tmp, out)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return load_manifest(out)
