"""How runs read a prepared directory: training samples in a seed-fixed order, fixed val windows.

Training samples come from megatron-core's `GPTDataset`, built through
`BlendedMegatronDatasetBuilder`: its shuffle depends only on (data, seq_length, num_samples,
seed), so two runs with the same `DataConfig.seed` see identical batches whatever their model.
Validation windows are drawn here with numpy from `val_seed`, without any process group, so every
process on every machine gets the same tensor.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

from data_prep.config import DataConfig
from data_prep.manifest import Manifest, load_manifest

__all__ = ["TrainingDataset", "training_dataset", "validation_windows"]


class _TokenizerInfo:
    """What megatron's dataset code reads from a tokenizer: EOD id, vocab size, identity.

    The data is already tokenised, so no encode/decode is needed; the identity (the tokenizer
    file's hash) keys megatron's index cache.
    """

    def __init__(self, manifest: Manifest) -> None:
        self.eod = manifest.eod_token_id
        self.vocab_size = manifest.vocab_size
        self.unique_identifiers = OrderedDict(
            {"class": "data_prep.prepared", "tokenizer_sha256": manifest["tokenizer"]["sha256"]}
        )


class TrainingDataset(torch.utils.data.Dataset):
    """Item ``i`` is ``tokens [seq_length + 1]`` (int64): inputs are ``[:-1]``, labels ``[1:]``."""

    def __init__(self, gpt_dataset, num_samples: int, seq_length: int) -> None:
        self.gpt_dataset = gpt_dataset
        self.num_samples = num_samples
        self.seq_length = seq_length

    def __len__(self) -> int:
        return self.num_samples

    def __getitem__(self, index: int) -> torch.Tensor:
        if not 0 <= index < self.num_samples:
            raise IndexError(f"sample {index} out of range [0, {self.num_samples})")
        item = self.gpt_dataset[index]
        # GPTDataset splits one [seq_length + 1] window into tokens [:-1] and labels [1:]
        return torch.cat([item["tokens"], item["labels"][-1:]])  # [seq_length + 1]


# flock refused by the file system (Lustre mounted `noflock`, some NFS setups)
_NO_FLOCK = (errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOLCK, errno.EINVAL)
MKDIR_LOCK_WAIT_S = 1800.0  # how long the fallback lock waits for another job's index build


@contextlib.contextmanager
def _cache_lock(cache_dir: Path) -> Iterator[None]:
    """Serialise index-cache builds across independent jobs sharing one prepared directory.

    megatron builds the cache on rank 0 and lets other ranks read it after a barrier, but two
    separate jobs (a sweep) could otherwise write and read the same ``.npy`` files at once.
    Where the file system refuses ``flock`` the lock is a directory made with ``mkdir``
    (atomic on every POSIX file system, Lustre and NFS included), with a message saying so.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    with open(cache_dir / ".lock", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
        except OSError as err:
            if err.errno not in _NO_FLOCK:
                raise
            print(
                f"[data] flock on {cache_dir / '.lock'} failed ({os.strerror(err.errno)}): the "
                "file system does not support it (e.g. Lustre mounted without flock); locking "
                f"with a directory instead ({cache_dir / '.lock.d'})",
                flush=True,
            )
            with _mkdir_lock(cache_dir / ".lock.d"):
                yield
            return
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def _mkdir_lock(path: Path, wait_s: float = MKDIR_LOCK_WAIT_S) -> Iterator[None]:
    """Hold `path` (a directory only one process can create) while the block runs."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            path.mkdir()
            break
        except FileExistsError:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{path} has been held for over {wait_s:g} s; if no other job is building "
                    f"this dataset's index, a crashed one left it: remove {path} and resubmit"
                ) from None
            time.sleep(0.5)
    try:
        yield
    finally:
        path.rmdir()


def training_dataset(data: DataConfig, seq_length: int, num_samples: int) -> TrainingDataset:
    """`num_samples` training windows of `seq_length + 1` tokens, shuffled by `data.seed`.

    Works in a plain process and inside a torch.distributed job (call it on every rank: megatron
    builds the index on rank 0, then the other ranks load it after a barrier). Epochs repeat with
    a fresh shuffle when `num_samples` exceeds one pass over the train split. Within one epoch
    the order does not depend on `num_samples`, so a shorter run trains on a prefix of a longer
    one with the same seed.
    """
    if seq_length < 1 or num_samples < 1:
        raise ValueError(
            f"training_dataset: seq_length={seq_length} and num_samples={num_samples} must be >= 1"
        )
    manifest = load_manifest(data.path)
    train_tokens = manifest["splits"]["train"]["tokens"]
    if train_tokens < seq_length + 1:
        raise ValueError(
            f"data.path: {data.path} has {train_tokens} train tokens, fewer than one sample of "
            f"{seq_length + 1}; prepare more data or shorten seq_length"
        )

    from megatron.core.datasets.blended_megatron_dataset_builder import (
        BlendedMegatronDatasetBuilder,
    )
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig

    cache_dir = manifest.path / "cache"
    config = GPTDatasetConfig(
        random_seed=data.seed,
        sequence_length=seq_length,
        blend_per_split=[([manifest.prefix("train")], None), None, None],
        path_to_cache=str(cache_dir),
        tokenizer=_TokenizerInfo(manifest),
        reset_position_ids=False,
        reset_attention_mask=False,
        eod_mask_loss=False,
        create_attention_mask=False,  # [1, s, s] per sample; models build their causal mask
    )
    builder = BlendedMegatronDatasetBuilder(
        GPTDataset, [num_samples, None, None], lambda: True, config
    )
    rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
    lock = _cache_lock(cache_dir) if rank == 0 else contextlib.nullcontext()
    with lock:
        train, _, _ = builder.build()
    return TrainingDataset(train, num_samples, seq_length)


WINDOW_SETS = ("loss", "select")


def validation_windows(data: DataConfig, seq_length: int, which: str = "loss") -> torch.Tensor:
    """``LongTensor [num_windows, seq_length + 1]``: the same windows in every process.

    The validation stream (all valid documents with their EOD tokens) is cut into
    non-overlapping windows of ``seq_length + 1``. ``which="loss"``: ``val_seed`` picks
    ``num_val_windows`` of them, the windows whose loss is reported and fitted (drawn exactly as
    before select sets existed, so adding one changes no reported loss). ``which="select"``: a
    second stream seeded by ``(val_seed, 1)`` picks ``num_select_windows`` of the windows the
    loss set left, used only to choose learning rates: choosing and reporting on the
    same windows would favour whichever arm is flatter across LRs. Both sets are kept in stream
    order and depend only on the dataset, ``seq_length`` and ``val_seed``, so every cell of a
    study sees the same ones. ``num_select_windows = 0`` gives an empty select set.
    """
    if which not in WINDOW_SETS:
        raise ValueError(f"which: {which!r}; use one of {', '.join(WINDOW_SETS)}")
    manifest = load_manifest(data.path)
    stream = np.memmap(manifest.path / "valid.bin", dtype=manifest["dtype"], mode="r")  # [T]
    width = seq_length + 1
    num_available = stream.size // width
    problem = data.windows_fit_problem(seq_length, stream.size)
    if problem:
        raise ValueError(problem)
    loss = np.random.default_rng(data.val_seed).choice(num_available, data.num_val_windows, False)
    chosen = loss
    if which == "select":
        rest = np.setdiff1d(np.arange(num_available), loss)  # sorted; disjoint from `loss`
        pick = np.random.default_rng([data.val_seed, 1]).choice(
            rest.size, data.num_select_windows, False
        )
        chosen = rest[pick]
    windows = stream[: num_available * width].reshape(num_available, width)[np.sort(chosen)]
    return torch.from_numpy(windows.astype(np.int64))  # [num_windows, seq_length + 1]
