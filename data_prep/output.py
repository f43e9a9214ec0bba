"""Where `prepare()` writes, and the one rule of what it may replace.

The rule: nothing prepare-data deletes or replaces is anything it did not create. An existing
output is replaced (``force``, or settings that changed) only when it is empty or a prepared
dataset this tool wrote: a ``manifest.json`` of its format beside only the files that prepare and
training put there. Any other file or folder, and an output that is, holds or lies inside a local
source, is refused by `check_output` before anything is read or written; the refusal names the
path and the fix, and never suggests ``--force`` where ``--force`` would not replace it.

Faults of writing (a full disk, a quota, the process's file-size limit) become one
`OutputWriteError` line naming the file, the fault and the fix; `prepare()` removes its partial
output, so the user's files are as they were.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

from data_prep.manifest import FORMAT_VERSION, MANIFEST_NAME, SPLITS

__all__ = [
    "OutputWriteError",
    "check_output",
    "install",
    "is_empty_folder",
    "output_lock",
    "remove_stale_temps",
    "replace_refusal",
    "temp_dir",
    "writing",
]

# What a prepared directory may hold: prepare's files and the index cache training adds
# (`data_prep.access`).
_OWNED_NAMES = frozenset(
    {MANIFEST_NAME, "tokenizer.json", "cache"}
    | {f"{split}.{kind}" for split in SPLITS for kind in ("bin", "idx")}
)
_OTHER_OUTPUT = "choose another -o (output_dir)"

# errno → (what happened, what to do). Only faults that writing alone raises: a read of the
# source never gives these, so naming the file as one prepare was writing is never wrong.
_WRITE_FAULTS = {
    errno.ENOSPC: ("the disk is full", "free space on it, or choose an -o (output_dir) elsewhere"),
    errno.EDQUOT: (
        "the disk quota is exceeded",
        "free space within the quota, or choose an -o (output_dir) elsewhere",
    ),
    errno.EFBIG: (
        "the file outgrew this process's file-size limit (ulimit -f)",
        "raise the limit (ulimit -f unlimited), or prepare less text (max_bytes, max_documents)",
    ),
}


class OutputWriteError(OSError):
    """Writing the prepared output failed; the message is one line: file, fault and fix."""


def _source_root(source: str) -> Path | None:
    """The file or folder a local source reads (a glob's part before its first wildcard);
    None for ``stdlib`` and ``hf:`` sources, which read nothing the output could overlap."""
    if source == "stdlib" or source.startswith("hf:"):
        return None
    literal: list[str] = []
    for part in Path(source).expanduser().parts:
        if glob.has_magic(part):
            break
        literal.append(part)
    return Path(*literal).resolve() if literal else Path.cwd()


def _owns_manifest(out: Path) -> bool:
    """`out` holds a manifest.json of the shape prepare writes (complete or not, its files
    whole or not: one prepare wrote, which prepare may therefore rebuild)."""
    try:
        data = json.loads((out / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return False
    return (
        isinstance(data, dict)
        and data.get("format") == FORMAT_VERSION
        and {"config", "splits", "vocab_size", "dtype"} <= data.keys()
    )


def replace_refusal(out: Path) -> str | None:
    """Why prepare may not replace the existing `out`, as a one-line refusal; None when it may
    (absent, an empty folder, or a dataset prepare wrote holding nothing else)."""
    if not out.exists() and not out.is_symlink():
        return None
    if not out.is_dir():
        return (
            f"data_prep.output_dir: {out} is a file, not a folder prepare-data made; "
            f"{_OTHER_OUTPUT}, or remove it yourself"
        )
    names = sorted(p.name for p in out.iterdir())
    if not names:
        return None
    if not _owns_manifest(out):
        return (
            f"data_prep.output_dir: {out} already holds files that prepare-data did not write "
            f"(it has no {MANIFEST_NAME} of a dataset prepare-data made), and prepare-data "
            f"replaces only its own output; {_OTHER_OUTPUT}, or empty or remove it yourself"
        )
    foreign = [n for n in names if n not in _OWNED_NAMES]
    if foreign:
        more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
        return (
            f"data_prep.output_dir: {out} is a prepared dataset but also holds {foreign[0]!r}"
            f"{more}, which prepare-data did not write, so it will not replace that folder; "
            f"move it out yourself, or {_OTHER_OUTPUT}"
        )
    return None


def check_output(out: Path, source: str, force: bool) -> None:
    """Refuse an output prepare may not write, before anything is read or written.

    Always refused: an output that is, lies inside or holds a local source; one below a file;
    a file; a non-empty folder without prepare's manifest. With `force` (a replacement), also a
    prepared dataset holding files prepare did not write. Without `force` such a dataset may
    still be reused as it is; `replace_refusal` stops it being rebuilt.
    """
    root = _source_root(source)
    if root is not None and (out == root or root in out.parents or out in root.parents):
        where = "is" if out == root else "lies inside" if root in out.parents else "holds"
        raise ValueError(
            f"data_prep.output_dir: {out} {where} the source {root}; prepare-data never writes "
            f"over its input: {_OTHER_OUTPUT} outside the source"
        )
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(
                    f"data_prep.output_dir: {out} lies below {parent}, which is a file, not a "
                    f"folder (not a directory); {_OTHER_OUTPUT}"
                )
            break
    refusal = replace_refusal(out)
    if refusal is None:
        return
    if force or not out.is_dir() or not _owns_manifest(out):
        raise ValueError(refusal)


def is_empty_folder(out: Path) -> bool:
    """An empty folder at `out` is taken as no output: prepare fills it."""
    return out.is_dir() and not any(out.iterdir())


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """Turn a write fault raised in the block into `OutputWriteError` naming `path` (or the
    file the fault names); other errors pass unchanged."""
    try:
        yield
    except OSError as err:
        raise_write_fault(err, path)
        raise


def raise_write_fault(err: OSError, path: Path) -> None:
    """Raise `err` as an `OutputWriteError` if it is a write fault; return otherwise."""
    if isinstance(err, OutputWriteError) or err.errno not in _WRITE_FAULTS:
        return
    what, fix = _WRITE_FAULTS[err.errno]
    where = Path(err.filename) if err.filename else path
    raise OutputWriteError(
        err.errno,
        f"writing {where} failed: {what} ({os.strerror(err.errno)}); {fix}; prepare-data "
        "removed its partial output and changed nothing else",
    ) from err


@contextlib.contextmanager
def output_lock(out: Path) -> Iterator[None]:
    """Hold `.NAME.lock` beside `out`. A refusal (ValueError) or write fault raised under it
    takes away what it made, the lock file and the folders made for it, so nothing is left."""
    made = [p for p in (out.parent, *out.parent.parents) if not p.exists()]
    lock = out.parent / f".{out.name}.lock"
    existed = lock.exists()

    def undo() -> None:
        if not existed:
            lock.unlink(missing_ok=True)
        for folder in made:  # deepest first; one another process filled stays
            with contextlib.suppress(OSError):
                folder.rmdir()

    try:
        with writing(lock):
            out.parent.mkdir(parents=True, exist_ok=True)
            lock.touch()
    except OSError:
        undo()
        raise
    with open(lock, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        except (ValueError, OutputWriteError):
            undo()
            raise
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def temp_dir(out: Path) -> Path:
    """The hidden sibling a prepare writes into before it is renamed to `out`."""
    return out.with_name(f".{out.name}.tmp-{os.getpid()}")


def remove_stale_temps(out: Path) -> None:
    """Remove the temp folders of killed prepares (call under `output_lock`): only folders
    named exactly as `temp_dir` names them."""
    pattern = re.compile(rf"\.{re.escape(out.name)}\.tmp-\d+")
    for stale in out.parent.glob(f".{glob.escape(out.name)}.tmp-*"):
        if pattern.fullmatch(stale.name) and stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)


def install(tmp: Path, out: Path) -> None:
    """Rename the finished `tmp` to `out`, replacing an old `out` only at the very end, and
    only after checking again (under the lock) that it is one prepare may replace."""
    if (refusal := replace_refusal(out)) is not None:
        raise ValueError(refusal)  # it changed since `check_output`
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    if out.exists():
        out.rename(old)
    tmp.rename(out)
    if old.exists():
        shutil.rmtree(old)
