"""Atomic, per-rank checkpoints and resume from the newest valid one.

Layout: `OUTPUT/checkpoints/step_00000012/rank_00000.pt ... + complete.json`. Every rank
writes its own file into `step_X.tmp/` (file-level temp + rename), all ranks meet at a barrier,
then rank 0 writes `complete.json` and renames the directory: a directory without the `.tmp`
suffix and with `complete.json` is whole. A run killed at any point leaves either a complete
checkpoint or a `.tmp` directory that resume ignores and the next save replaces.

A write that fails (a full disk, a quota, an I/O error) on any rank fails on every rank alike
with `CheckpointWriteError`, after its `.tmp` directory is removed (so the space it took is
free again); older complete checkpoints are untouched, and the next attempt resumes from them.

State that several ranks hold identically is written once: a data-parallel rank other than the
first puts `shared_from(rank)` in place of its model (and, unless the engine shards it over
DP, optimiser) state, and a load fills such entries from that rank's file of the same
checkpoint. A checkpoint then weighs one copy of the model and optimiser, not one per DP rank.

Loads use `torch.load(weights_only=True)`: payloads hold tensors, numbers, strings, lists and
dicts only.

Integrity: a file damaged after it was written (a bad disk block, a stray write into the middle
of a tensor) still unpickles, and its weights would train on as NaN or noise. So each rank hashes
its file while writing it (sha256, one pass, no re-read) and `complete.json` records every rank
file's digest and size (`files`). Resume checks a file against it before loading it; a file that
fails is skipped like an unreadable one: the newest intact checkpoint is used and the log says
which was skipped and why, or the run starts afresh if none is intact. A checkpoint written before
checksums (no `files`) is loaded unchecked.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from jobs.engines.collectives import all_ranks

__all__ = [
    "CheckpointWriteError",
    "save_checkpoint",
    "load_newest",
    "load_step",
    "step_dir",
    "list_checkpoints",
    "check_layout",
    "shared_from",
    "rng_state",
    "set_rng_state",
]

_STEP_DIR = re.compile(r"^step_(\d{8})$")
_SHARED = "shared_from_rank"
_CHUNK = 1 << 20  # bytes hashed per read when a load checks a file


class _HashingWriter:
    """A binary file that hashes what torch.save writes through it (torch writes sequentially)."""

    def __init__(self, file: Any) -> None:
        self.file = file
        self.sha256 = hashlib.sha256()
        self.size = 0

    def write(self, data: Any) -> int:
        self.sha256.update(data)
        self.size += memoryview(data).nbytes
        return self.file.write(data)

    def flush(self) -> None:
        self.file.flush()


def _digest_name(rank: int) -> str:
    return f".rank_{rank:05d}.sha256"


def shared_from(rank: int) -> dict[str, int]:
    """The entry a payload holds instead of state identical to global rank `rank`'s."""
    return {_SHARED: rank}


def _shared_rank(value: Any) -> int | None:
    if isinstance(value, dict) and len(value) == 1 and _SHARED in value:
        return int(value[_SHARED])
    return None


def _rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def _barrier() -> None:
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()


class CheckpointWriteError(RuntimeError):
    """A checkpoint could not be written; older ones are intact (`root`, `step`, `newest`)."""


def rng_state() -> dict[str, Any]:
    """Every RNG the step could draw from: torch CPU and (when present) this rank's CUDA."""
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def list_checkpoints(root: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints under `root`, newest first."""
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        match = _STEP_DIR.match(path.name)
        if match and (path / "complete.json").is_file():
            found.append((int(match.group(1)), path))
    return sorted(found, reverse=True)


def step_dir(root: Path, step: int) -> Path:
    """Where the checkpoint of `step` lives under `root` (complete once it has complete.json)."""
    return Path(root) / f"step_{step:08d}"


def save_checkpoint(
    root: Path,
    step: int,
    payload: dict[str, Any],
    keep: int,
    layout: dict[str, int] | None = None,
    keep_steps: Collection[int] = (),
) -> Path:
    """Collective: every rank saves `payload`; returns the complete directory.

    `layout` (TP, PP, DP) is recorded in `complete.json` so a load can refuse another one.
    The newest `keep` checkpoints stay, plus those of `keep_steps` (branch points), never rotated.
    """
    final = step_dir(root, step)
    tmp = root / f"step_{step:08d}.tmp"
    rank = _rank()
    if rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    _barrier()
    target = tmp / f"rank_{rank:05d}.pt"
    partial = tmp / f".rank_{rank:05d}.pt.partial"
    error: BaseException | None = None
    try:
        with open(partial, "wb") as f:
            writer = _HashingWriter(f)
            # a full disk: OSError, or RuntimeError from torch's writer
            torch.save(payload, writer)  # type: ignore[arg-type]
        digest = {"sha256": writer.sha256.hexdigest(), "bytes": writer.size}
        (tmp / _digest_name(rank)).write_text(json.dumps(digest))  # for rank 0's manifest
        os.replace(partial, target)
    except (OSError, RuntimeError) as err:
        error = err
    if all_ranks(error is None) and rank == 0:
        try:
            world = dist.get_world_size() if dist.is_initialized() else 1
            record = {"step": step, "world_size": world, **(layout or {})}
            record["files"] = _gather_digests(tmp, world)
            (tmp / "complete.json").write_text(json.dumps(record))
            if final.exists():  # a re-save of the same step (e.g. preemption right after a save)
                shutil.rmtree(final)
            os.replace(tmp, final)
            _fsync_dir(root)
        except OSError as err:
            error = err
    if not all_ranks(error is None):
        if rank == 0:
            shutil.rmtree(tmp, ignore_errors=True)  # give the space back
        newest = list_checkpoints(root)
        kept = f"step {newest[0][0]} ({newest[0][1]})" if newest else "none"
        why = f"{type(error).__name__}: {error}" if error is not None else "failed on another rank"
        # torch's writer reports a full disk as e.g. "unexpected pos 64 vs 0": name the cause
        why += f" ({shutil.disk_usage(root).free:,} bytes free on that filesystem)"
        failed = CheckpointWriteError(
            f"could not write the checkpoint of step {step} under {root}: {why}. Nothing of it "
            f"was kept; the newest complete checkpoint is {kept}, and a rerun resumes from it "
            "once the disk has room."
        )
        failed.root, failed.step, failed.newest = root, step, newest[0][0] if newest else None
        raise failed from error
    if rank == 0:
        rotating = [(s, path) for s, path in list_checkpoints(root) if s not in keep_steps]
        for _, old in rotating[keep:]:
            shutil.rmtree(old, ignore_errors=True)
    _barrier()
    return final


def _gather_digests(tmp: Path, world: int) -> dict[str, dict[str, Any]]:
    """Every rank's file digest, read from the sidecars the ranks wrote (then removed)."""
    files = {}
    for rank in range(world):
        sidecar = tmp / _digest_name(rank)
        files[f"rank_{rank:05d}.pt"] = json.loads(sidecar.read_text())
        sidecar.unlink()
    return files


def _manifest(path: Path) -> dict[str, Any] | None:
    """The checkpoint's `complete.json`, or None (and a word) if it cannot be read."""
    try:
        data = json.loads((path / "complete.json").read_text())
    except (OSError, ValueError) as err:  # ValueError: a damaged file is not JSON, or not UTF-8
        print(f"[jobs] checkpoint {path}: complete.json unreadable ({err})", flush=True)
        return None
    if not isinstance(data, dict):
        print(f"[jobs] checkpoint {path}: complete.json is not a record", flush=True)
        return None
    return data


def _damage(path: Path, expected: dict[str, Any] | None) -> str | None:
    """Why file `path` differs from what its checkpoint wrote (size, sha256), or None."""
    if expected is None:
        return None  # written before checksums: nothing to check against
    if not isinstance(expected, dict) or not {"bytes", "sha256"} <= expected.keys():
        return f"complete.json records no size and sha256 for it ({expected!r})"
    try:
        size = path.stat().st_size
        if size != expected["bytes"]:
            return f"{size:,} bytes, written as {expected['bytes']:,}"
        sha256 = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                sha256.update(chunk)
    except OSError as err:
        return f"unreadable ({err})"
    if sha256.hexdigest() != expected["sha256"]:
        return "its sha256 differs from the one recorded when it was written"
    return None


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _try_load(path: Path, files: dict[str, Any]) -> dict[str, Any] | None:
    """The payload in `path`, or None (and a word) if it fails its checksum or cannot be read;
    `files` is the checkpoint manifest's `files` (empty for a checkpoint without checksums)."""
    damage = _damage(path, files.get(path.name))
    if damage is not None:
        print(f"[jobs] checkpoint {path} is damaged: {damage}; not loaded", flush=True)
        return None
    try:
        # mmap: every DP rank reads the same replica file; mapped pages are shared through the
        # page cache instead of each rank holding its own copy while it loads
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # a torn or foreign file raises many types (IndexError among them)
        print(f"[jobs] checkpoint {path} unreadable ({err}); not loaded", flush=True)
        return None


def _shared_entries(payload: dict[str, Any]) -> list[tuple[tuple[str, ...], int]]:
    """(keys, source rank) of each `shared_from` entry, at the top level or one level down."""
    found = []
    for key, value in payload.items():
        source = _shared_rank(value)
        if source is not None:
            found.append(((key,), source))
        elif isinstance(value, dict):
            for inner, item in value.items():
                source = _shared_rank(item)
                if source is not None:
                    found.append(((key, inner), source))
    return found


def _load_rank(path: Path, rank: int, manifest: dict[str, Any]) -> dict[str, Any] | None:
    """Rank `rank`'s payload of checkpoint `path` with its `shared_from` entries filled from
    the files that hold them; None if a file is damaged, unreadable or lacks the entry."""
    files = manifest.get("files") or {}
    if not isinstance(files, dict):
        print(f"[jobs] checkpoint {path}: complete.json's `files` is damaged", flush=True)
        return None
    payload = _try_load(path / f"rank_{rank:05d}.pt", files)
    if payload is None:
        return None
    sources: dict[int, Any] = {}
    for keys, source in _shared_entries(payload):
        if source not in sources:
            sources[source] = _try_load(path / f"rank_{source:05d}.pt", files)
        value = sources[source]
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None or _shared_rank(value) is not None:
            print(f"[jobs] checkpoint {path}: rank {source} lacks {'.'.join(keys)}", flush=True)
            return None
        target = payload
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value
    return payload


def check_layout(path: Path, layout: dict[str, int], saved: dict[str, Any] | None = None) -> None:
    """Raise ValueError if checkpoint `path` was written with another parallel layout.

    Each rank's file holds its own shard of the model and optimiser, so shards written at one
    TP x PP x DP cannot be read at another: loading them would fail deep inside torch or, worse,
    load the wrong slices.
    """
    if saved is None:
        saved = json.loads((path / "complete.json").read_text())
    world = dist.get_world_size() if dist.is_initialized() else 1
    expected = {"world_size": world, **layout}
    differs = {k: (saved[k], v) for k, v in expected.items() if k in saved and saved[k] != v}
    if differs:
        was = ", ".join(f"{k} {old}" for k, (old, _) in differs.items())
        now = ", ".join(f"{k} {new}" for k, (_, new) in differs.items())
        raise ValueError(
            f"checkpoint {path} was written with {was}, but this run has {now}; resume with the "
            "parallel layout it was saved with (run.parallel), or start afresh in another "
            "output_dir"
        )


def load_newest(
    root: Path,
    load_fn: Callable[[dict[str, Any]], None] | None = None,
    layout: dict[str, int] | None = None,
) -> dict[str, Any] | None:
    """Collective: this rank's payload from the newest checkpoint every rank can read, or None.

    A checkpoint with a missing, unreadable or damaged (checksum) rank file is skipped on all
    ranks alike, and the log names it and the step resumed instead; with none intact, None (the
    run starts afresh). One written with another parallel `layout` (or world size) raises
    ValueError before anything is read.
    """
    rank = _rank()
    skipped = []
    for step, path in list_checkpoints(root):
        manifest = _manifest(path)
        if manifest is not None:
            check_layout(path, layout or {}, manifest)
        payload = _load_rank(path, rank, manifest) if manifest is not None else None
        if all_ranks(payload is not None):
            assert payload is not None
            if skipped and rank == 0:
                print(
                    f"[jobs] resuming from step {step}, the newest intact checkpoint under "
                    f"{root} (skipped step {', '.join(map(str, skipped))}: damaged or unreadable)",
                    flush=True,
                )
            if load_fn is not None:
                load_fn(payload)
            return payload
        skipped.append(step)
    if skipped and rank == 0:
        print(
            f"[jobs] no intact checkpoint under {root} (step {', '.join(map(str, skipped))} "
            "damaged or unreadable): starting afresh",
            flush=True,
        )
    return None


def load_step(path: Path, layout: dict[str, int] | None = None) -> dict[str, Any]:
    """Collective: this rank's payload of the complete checkpoint directory `path`.

    For a run that starts from another run's checkpoint: unlike `load_newest` there is no
    older one to fall back to, so a missing, unreadable or damaged file raises
    (FileNotFoundError).
    """
    if not (path / "complete.json").is_file():
        raise FileNotFoundError(f"{path} is not a complete checkpoint (no complete.json)")
    manifest = _manifest(path)
    if manifest is None:
        raise FileNotFoundError(f"{path}: its complete.json is unreadable")
    check_layout(path, layout or {}, manifest)
    payload = _load_rank(path, _rank(), manifest)
    if not all_ranks(payload is not None):
        raise FileNotFoundError(
            f"{path}: a rank's file is missing, unreadable or damaged (see the lines above)"
        )
    assert payload is not None
    return payload
