"""The manifest of a prepared directory, and the checks that a directory is whole.

A prepared directory is only ever renamed into place after its manifest is written, so a
manifest means "complete" — but files can still be truncated or swapped later (a full disk, a
partial copy). `load_manifest` therefore re-checks every ``.bin``/``.idx`` pair against the
manifest and against the index header before anything trains on it.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "Manifest",
    "load_manifest",
    "SPLITS",
    "MANIFEST_NAME",
    "file_sha256",
    "index_sizes",
]

MANIFEST_NAME = "manifest.json"
SPLITS = ("train", "valid")
FORMAT_VERSION = 1

# megatron-core's indexed format (megatron/core/datasets/indexed_dataset.py): a 9-byte magic,
# u64 version 1, u8 dtype code, u64 sequence count, u64 document count, then int32 lengths,
# int64 byte pointers (one per sequence) and int64 document boundaries.
_IDX_MAGIC = b"MMIDIDX\x00\x00"
_IDX_HEADER_BYTES = 9 + 8 + 1 + 8 + 8
_DTYPE_CODES = {"uint16": 8, "int32": 4}


class Manifest(dict):
    """``manifest.json`` as a dict, plus the prepared directory it describes."""

    def __init__(self, data: dict[str, Any], path: Path) -> None:
        super().__init__(data)
        self.path = Path(path)

    @property
    def vocab_size(self) -> int:
        return int(self["vocab_size"])

    @property
    def eod_token_id(self) -> int:
        return int(self["eod_token_id"])

    @property
    def digest(self) -> str:
        """16 hex digits of a hash of every split's token files (their sha256s in the manifest).

        The identity of what a run trains on, short enough for MLflow's dataset digest (at most
        36 characters): two directories with the same tokens share it, a re-tokenised one does
        not, whatever its path or creation time.
        """
        lines = [
            f"{split}:{meta['bin_sha256']}:{meta['idx_sha256']}"
            for split, meta in sorted(self["splits"].items())
        ]
        return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]

    def prefix(self, split: str) -> str:
        """Path prefix megatron-core expects (``DIR/train`` for ``train.bin``/``train.idx``)."""
        return str(self.path / split)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def index_sizes(idx_path: Path) -> tuple[str, np.ndarray, int]:
    """(dtype name, per-sequence token counts, document count) read from an ``.idx`` header.

    Raises ValueError naming the file when the header or the file size is inconsistent.
    """
    size = idx_path.stat().st_size
    with open(idx_path, "rb") as f:
        header = f.read(_IDX_HEADER_BYTES)
    if len(header) < _IDX_HEADER_BYTES or header[:9] != _IDX_MAGIC:
        raise ValueError(f"{idx_path}: not a megatron index (bad header); {_REBUILD}")
    version, code, num_sequences, num_doc_bounds = struct.unpack("<QBQQ", header[9:])
    names = {v: k for k, v in _DTYPE_CODES.items()}
    if version != 1 or code not in names:
        raise ValueError(
            f"{idx_path}: unsupported version {version} / dtype code {code}; {_REBUILD}"
        )
    expected = _IDX_HEADER_BYTES + 12 * num_sequences + 8 * num_doc_bounds
    if size != expected:
        raise ValueError(
            f"{idx_path}: {size} bytes but its header promises {expected} (truncated or "
            f"overwritten); {_REBUILD}"
        )
    lengths = np.fromfile(idx_path, dtype=np.int32, count=num_sequences, offset=_IDX_HEADER_BYTES)
    return names[code], lengths, num_doc_bounds - 1


_REBUILD = "rebuild it with `scaling prepare-data ... --force`"
# for a folder --force will not replace (`data_prep.output`): not one prepare-data wrote
_NOT_PREPARED = (
    "point at a folder made by `scaling prepare-data`, or prepare one into a new or empty "
    "folder (`scaling prepare-data --output DIR`)"
)


def _check_split(directory: Path, split: str, meta: dict, dtype: str, verify_hashes: bool) -> None:
    bin_path, idx_path = directory / f"{split}.bin", directory / f"{split}.idx"
    for path in (bin_path, idx_path):
        if not path.is_file():
            raise ValueError(f"{path}: missing from the prepared directory; {_REBUILD}")
    idx_dtype, lengths, num_documents = index_sizes(idx_path)
    if idx_dtype != dtype:
        raise ValueError(
            f"{idx_path}: holds {idx_dtype} tokens but the manifest says {dtype} (files from "
            f"another dataset?); {_REBUILD}"
        )
    if num_documents != meta["documents"] or int(lengths.sum()) != meta["tokens"]:
        raise ValueError(
            f"{idx_path}: {num_documents} documents / {int(lengths.sum())} tokens, manifest says "
            f"{meta['documents']} / {meta['tokens']} (mismatched files); {_REBUILD}"
        )
    expected_bin = int(lengths.sum()) * np.dtype(dtype).itemsize
    actual_bin = bin_path.stat().st_size
    if actual_bin != expected_bin:
        raise ValueError(
            f"{bin_path}: {actual_bin} bytes but its index needs {expected_bin} (truncated or "
            f"mismatched .bin/.idx); {_REBUILD}"
        )
    if verify_hashes:
        for path, key in ((bin_path, "bin_sha256"), (idx_path, "idx_sha256")):
            if file_sha256(path) != meta[key]:
                raise ValueError(f"{path}: content hash differs from the manifest; {_REBUILD}")


def load_manifest(path: str | Path, verify_hashes: bool = False) -> Manifest:
    """Read ``DIR/manifest.json`` and check that every split's files are whole.

    Size and header checks are cheap and always run; ``verify_hashes`` re-hashes the data too.
    """
    directory = Path(path)
    manifest_path = directory / MANIFEST_NAME
    if not directory.is_dir():
        raise ValueError(
            f"{directory}: no such prepared dataset directory; create it with "
            f"`scaling prepare-data --output {directory}`"
        )
    if not manifest_path.is_file():
        raise ValueError(
            f"{directory}: no {MANIFEST_NAME}, so not a dataset prepare-data made; {_NOT_PREPARED}"
        )
    try:
        data = json.loads(manifest_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{manifest_path}: not valid JSON ({err}); {_NOT_PREPARED}") from err
    if not isinstance(data, dict):
        data = {}  # a JSON list or number: reported below as missing every key
    missing = [
        k for k in ("format", "vocab_size", "eod_token_id", "dtype", "splits") if k not in data
    ]
    if missing or data.get("format") != FORMAT_VERSION:
        raise ValueError(
            f"{manifest_path}: not a format-{FORMAT_VERSION} manifest (missing {missing}); "
            + _NOT_PREPARED
        )
    for split in SPLITS:
        if split not in data["splits"]:
            raise ValueError(f"{manifest_path}: no {split!r} split recorded; {_REBUILD}")
        _check_split(directory, split, data["splits"][split], data["dtype"], verify_hashes)
    return Manifest(data, directory)
