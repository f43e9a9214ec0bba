"""Where documents come from: the stdlib corpus, a Hugging Face dataset, or local files.

A `Source` is re-iterable (BPE training reads the train split once, tokenisation once more) and
always yields documents in the same order, which is what makes the split and the token stream
reproducible. `open_source` does every check that can fail on bad input (missing files, absent
text field, unreachable hub) before `prepare()` writes anything.
"""

from __future__ import annotations

import glob
import hashlib
import itertools
import os
import platform
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from data_prep.config import LOCAL_SUFFIXES, DataPrepConfig

__all__ = ["Source", "open_source", "local_fingerprint", "stdlib_files"]


@dataclass
class Source:
    """A re-iterable, ordered stream of non-empty documents plus a description for the manifest."""

    description: dict[str, Any]
    _iterate: Any = field(repr=False)
    max_documents: int | None = None
    max_bytes: int | None = None

    def documents(self) -> Iterator[str]:
        """Documents in their fixed order; empty ones are skipped, limits applied."""
        num_bytes = 0
        texts = (t for t in self._iterate() if t)
        for text in itertools.islice(texts, self.max_documents):
            if not isinstance(text, str):
                raise ValueError(
                    f"data_prep.text_field: a document is a {type(text).__name__}, not text; "
                    "point text_field at a string column"
                )
            yield text
            if self.max_bytes is not None:
                num_bytes += len(text.encode("utf-8"))
                if num_bytes >= self.max_bytes:
                    return


def stdlib_files() -> tuple[Path, list[Path]]:
    """The standard library's ``.py`` files in a fixed (sorted, relative-path) order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in ("site-packages", "__pycache__"))
        files.extend(Path(directory, n) for n in names if n.endswith(".py"))
    return root, sorted(files, key=lambda p: p.relative_to(root).as_posix())


def _read_utf8(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return ""  # a few stdlib test files are deliberately not UTF-8; skipped like empty ones


def _stdlib_description() -> tuple[dict[str, Any], list[Path]]:
    root, files = stdlib_files()
    listing = hashlib.sha256()
    for path in files:
        listing.update(f"{path.relative_to(root).as_posix()}:{path.stat().st_size}\n".encode())
    description = {
        "kind": "stdlib",
        "root": str(root),
        "python_version": platform.python_version(),
        "num_files": len(files),
        "fingerprint": listing.hexdigest(),
    }
    return description, files


def _stdlib_source(config: DataPrepConfig) -> Source:
    description, files = _stdlib_description()
    return Source(description, lambda: (_read_utf8(p) for p in files))


def _local_files(source: str) -> list[Path]:
    path = Path(source).expanduser()
    if path.is_file():
        files = [path]
    elif path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in LOCAL_SUFFIXES)
        if not files:
            raise ValueError(
                f"data_prep.source: {path} holds no {'/'.join(LOCAL_SUFFIXES)} files; "
                "point at a directory of text/jsonl/parquet files"
            )
    else:
        files = sorted(Path(p) for p in glob.glob(str(path), recursive=True) if Path(p).is_file())
        if not files:
            raise ValueError(
                f"data_prep.source: {source} does not exist (no file, directory or glob match); "
                "check the path, or use stdlib / hf:NAME"
            )
    suffixes = {p.suffix for p in files}
    if not suffixes <= set(LOCAL_SUFFIXES) or len(suffixes) > 1:
        raise ValueError(
            f"data_prep.source: {source} gives files of type {sorted(suffixes)}; expected one of "
            f"{', '.join(LOCAL_SUFFIXES)}, all the same"
        )
    return files


def _check_text_field(dataset: Any, text_field: str, where: str) -> None:
    columns = dataset.column_names
    if columns is None:  # a streaming dataset learns its columns from the first row
        first = next(iter(dataset), None)
        columns = list(first) if first is not None else []
    if text_field not in columns:
        raise ValueError(
            f"data_prep.text_field: {where} has no field {text_field!r}; its fields are "
            f"{', '.join(columns) or '(none)'}; set text_field to the one holding the text"
        )


def _local_description(source: str) -> tuple[dict[str, Any], list[Path]]:
    files = _local_files(source)
    listing = hashlib.sha256()
    for path in files:
        stat = path.stat()
        listing.update(f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    description = {
        "kind": "local",
        "files": [str(p) for p in files[:50]] + (["..."] if len(files) > 50 else []),
        "num_files": len(files),
        "fingerprint": listing.hexdigest(),
    }
    return description, files


def local_fingerprint(config: DataPrepConfig) -> str | None:
    """A cheap fingerprint (file names, sizes, times) of a stdlib or local source; None for hf."""
    if config.source == "stdlib":
        return _stdlib_description()[0]["fingerprint"]
    if config.source.startswith("hf:"):
        return None
    return _local_description(config.source)[0]["fingerprint"]


def _local_source(config: DataPrepConfig) -> Source:
    description, files = _local_description(config.source)
    if files[0].suffix == ".txt":  # one file, one document
        return Source(description, lambda: (_read_utf8(p) for p in files))

    import datasets

    builder = "parquet" if files[0].suffix == ".parquet" else "json"
    try:
        dataset = datasets.load_dataset(
            builder, data_files=[str(p) for p in files], split="train", streaming=config.streaming
        )
    except datasets.exceptions.DatasetGenerationError as err:
        raise ValueError(
            f"data_prep.source: could not parse {config.source} as {builder} "
            f"({err.__cause__ or err}); check the files"
        ) from err
    _check_text_field(dataset, config.text_field, config.source)
    return Source(description, lambda: _texts(dataset, config.text_field))


def _texts(dataset: Any, text_field: str) -> Iterator[str]:
    """One column, read in batches (row-by-row dicts of every column are several times slower)."""
    for batch in dataset.select_columns([text_field]).iter(batch_size=1024):
        yield from batch[text_field]


def _hf_source(config: DataPrepConfig) -> Source:
    import datasets

    name, dataset_config, split = (config.source[3:].split(":") + [None, None])[:3]
    split = split or "train"
    try:
        dataset = datasets.load_dataset(
            name, dataset_config or None, split=split, streaming=config.streaming
        )
    except ConnectionError as err:
        from huggingface_hub import is_offline_mode

        offline = is_offline_mode() or "OfflineModeIsEnabled" in str(err)
        hint = (
            "HF_HUB_OFFLINE is set and it is not in the local Hugging Face cache; fill the cache "
            "(HF_HOME) on a machine with hub access, or use local files or stdlib"
            if offline
            else "the Hugging Face hub is unreachable from here; check network/proxy "
            "(HF_ENDPOINT), or download it elsewhere and pass local files, or use stdlib"
        )
        raise ValueError(f"data_prep.source: could not load {config.source!r}: {hint}") from err
    except (datasets.exceptions.DatasetNotFoundError, FileNotFoundError) as err:
        raise ValueError(
            f"data_prep.source: {config.source!r} not found on the hub ({err}); check the name"
        ) from err
    except ValueError as err:  # e.g. an unknown split or config, listed by datasets
        raise ValueError(f"data_prep.source: {config.source!r}: {err}") from err
    _check_text_field(dataset, config.text_field, config.source)
    info = getattr(dataset, "info", None)
    description = {
        "kind": "hf",
        "name": name,
        "config": dataset_config,
        "split": split,
        "fingerprint": getattr(dataset, "_fingerprint", None),
        "version": str(getattr(info, "version", None)),
    }
    return Source(description, lambda: _texts(dataset, config.text_field))


def open_source(config: DataPrepConfig) -> Source:
    """The configured source, checked; raises ValueError naming the bad field and the fix."""
    if config.source == "stdlib":
        source = _stdlib_source(config)
    elif config.source.startswith("hf:"):
        source = _hf_source(config)
    else:
        source = _local_source(config)
    source.max_documents, source.max_bytes = config.max_documents, config.max_bytes
    if next(source.documents(), None) is None:
        raise ValueError(
            f"data_prep.source: {config.source!r} has no non-empty documents (empty corpus); "
            "check the files or the text field"
        )
    return source
