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
"""

from __future__ import annotations

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
    """A checkpoint could not be written; the ones written before it are intact."""


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
        torch.save(payload, partial)  # a full disk: OSError, or RuntimeError from torch's writer
        os.replace(partial, target)
    except (OSError, RuntimeError) as err:
        error = err
    if all_ranks(error is None) and rank == 0:
        try:
            world = dist.get_world_size() if dist.is_initialized() else 1
            record = {"step": step, "world_size": world, **(layout or {})}
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
        raise CheckpointWriteError(
            f"could not write the checkpoint of step {step} under {root}: {why}. Nothing of it "
            f"was kept; the newest complete checkpoint is {kept}, and a rerun resumes from it "
            "once the disk has room."
        ) from error
    if rank == 0:
        rotating = [(s, path) for s, path in list_checkpoints(root) if s not in keep_steps]
        for _, old in rotating[keep:]:
            shutil.rmtree(old, ignore_errors=True)
    _barrier()
    return final


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _try_load(path: Path) -> dict[str, Any] | None:
    try:
        # mmap: every DP rank reads the same replica file; mapped pages are shared through the
        # page cache instead of each rank holding its own copy while it loads
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # a torn or foreign file raises many types (IndexError among them)
        print(f"[jobs] checkpoint {path} unreadable ({err}); trying an older one", flush=True)
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


def _load_rank(path: Path, rank: int) -> dict[str, Any] | None:
    """Rank `rank`'s payload of checkpoint `path` with its `shared_from` entries filled from
    the files that hold them; None if a file is unreadable or lacks the entry."""
    payload = _try_load(path / f"rank_{rank:05d}.pt")
    if payload is None:
        return None
    sources: dict[int, Any] = {}
    for keys, source in _shared_entries(payload):
        if source not in sources:
            sources[source] = _try_load(path / f"rank_{source:05d}.pt")
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


def check_layout(path: Path, layout: dict[str, int]) -> None:
    """Raise ValueError if checkpoint `path` was written with another parallel layout.

    Each rank's file holds its own shard of the model and optimiser, so shards written at one
    TP x PP x DP cannot be read at another: loading them would fail deep inside torch or, worse,
    load the wrong slices.
    """
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

    A checkpoint with a missing or corrupt rank file is skipped on all ranks alike; one written
    with another parallel `layout` (or world size) raises ValueError before anything is read.
    """
    rank = _rank()
    for _, path in list_checkpoints(root):
        check_layout(path, layout or {})
        payload = _load_rank(path, rank)
        if all_ranks(payload is not None):
            assert payload is not None
            if load_fn is not None:
                load_fn(payload)
            return payload
    return None


def load_step(path: Path, layout: dict[str, int] | None = None) -> dict[str, Any]:
    """Collective: this rank's payload of the complete checkpoint directory `path`.

    For a run that starts from another run's checkpoint: unlike `load_newest` there is no
    older one to fall back to, so a missing or unreadable file raises (FileNotFoundError).
    """
    if not (path / "complete.json").is_file():
        raise FileNotFoundError(f"{path} is not a complete checkpoint (no complete.json)")
    check_layout(path, layout or {})
    payload = _load_rank(path, _rank())
    if not all_ranks(payload is not None):
        raise FileNotFoundError(f"{path}: a rank's file is missing or unreadable")
    assert payload is not None
    return payload
