"""Known faults that end a job, each told in one line: what broke, where, and what to do.

A job stopped by a full disk used to end in a boxed traceback of 120 lines, wrapped at the
terminal's width, whose last lines were already the whole story. The job's entry points
(`python -m jobs`, `scaling train`, submitit's `TrainingJob`) now run it under
`reporting_known_faults`: a known fault prints one line,

    error: disk full (ENOSPC): /data/run/checkpoints (0 bytes free): the checkpoint of step 20
    was not written; free space there, then rerun the job: it resumes from step 10

(one line in the log), last on the job's stderr, which is the line `scaling status` shows for a
failed cell (`scaling.state.job_errors`), and the job exits with `EXIT_KNOWN_FAULT`. The
traceback goes to a file beside the job's log, named on the line before (`<log>.traceback`),
or to stderr with `--verbose` or `SCALING_JOB_VERBOSE=1`. Any other exception keeps its
traceback, as before.

The four faults are told apart by what was raised, never by its text:
- disk full: an `OSError` with errno ENOSPC or EDQUOT anywhere in the exception's chain;
- read-only file system: errno EROFS;
- tracking server unreachable: an MLflow exception over a failed connection (refused, reset,
  timed out, no such host). The training loop itself spools through an outage
  (`jobs.telemetry.tracking`); this is for an MLflow call that cannot wait;
- corrupted or missing data: an error raised by the readers of a prepared dataset (the
  manifest's checks of every `.bin`/`.idx` pair, megatron-core's index reader), whose message
  names the file and the fix.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import struct
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from foundation.secrets import mask_userinfo

if TYPE_CHECKING:
    from jobs.config import RunConfig

__all__ = [
    "EXIT_KNOWN_FAULT",
    "VERBOSE_ENV",
    "Fault",
    "known_fault",
    "exit_on_known_fault",
    "reporting_known_faults",
    "verbose_requested",
]

EXIT_KNOWN_FAULT = 3  # 1 is any crash, 2 a config the job refused (`jobs.cli`)
VERBOSE_ENV = "SCALING_JOB_VERBOSE"  # "1": a known fault's traceback on stderr too

DISK_FULL = "disk full"
READ_ONLY = "read-only file system"
TRACKING = "tracking server unreachable"
DATA = "corrupted or missing data"

_DISK_FULL_ERRNOS = {errno.ENOSPC: "ENOSPC", errno.EDQUOT: "EDQUOT"}
# where a prepared dataset is read and checked; what they raise on a damaged file
_DATA_READERS = ("data_prep.manifest", "megatron.core.datasets.indexed_dataset")
_DATA_ERRORS = (ValueError, AssertionError, IndexError, EOFError, struct.error)
_REBUILD = "rebuild it with `scaling prepare-data ... --force`"


@dataclass(frozen=True)
class Fault:
    """A known fault: its `kind` (one of the four above), the file, folder or server it hit
    (`where`), and the `line` the job prints for it."""

    kind: str
    where: str
    line: str


def known_fault(err: BaseException, config: RunConfig | None = None) -> Fault | None:
    """The known fault behind `err` (its whole chain: causes and contexts), or None."""
    chain = list(_chain(err))
    for e in chain:
        if isinstance(e, OSError) and e.errno in _DISK_FULL_ERRNOS:
            return _disk_full(_DISK_FULL_ERRNOS[e.errno], chain, config)
        if isinstance(e, OSError) and e.errno == errno.EROFS:
            return _read_only(chain, config)
    if any(type(e).__module__.startswith("mlflow") for e in chain) and any(
        _connection_failed(e) for e in chain
    ):
        return _tracking(config)
    for e in chain:
        if isinstance(e, _DATA_ERRORS) and _raised_in(e, _DATA_READERS):
            return _data(e, config)
    return None


def exit_on_known_fault(
    err: BaseException, config: RunConfig | None = None, verbose: bool | None = None
) -> None:
    """If `err` is a known fault: its line, last on stderr, and exit `EXIT_KNOWN_FAULT`; else
    return (the caller re-raises). `verbose` None: `verbose_requested()`."""
    fault = known_fault(err, config)
    if fault is None:
        return
    verbose = verbose_requested() if verbose is None else verbose
    rank = os.environ.get("RANK", "0")
    try:
        if verbose:
            traceback.print_exception(err, file=sys.stderr)
        else:
            print(f"[jobs] {_keep_traceback(err, rank)}", file=sys.stderr)
        # rank 0's line as `scaling status` reads it; another rank's names itself
        print(fault.line if rank == "0" else f"rank{rank}: {fault.line}", file=sys.stderr)
        sys.stderr.flush()
    except OSError:  # stderr on the disk that is full: the exit code still says it
        pass
    raise SystemExit(EXIT_KNOWN_FAULT) from None


@contextlib.contextmanager
def reporting_known_faults(
    config: RunConfig | None = None, verbose: bool | None = None
) -> Iterator[None]:
    """Run the block; a known fault ends the process with its one line (`exit_on_known_fault`),
    anything else propagates untouched."""
    try:
        yield
    except Exception as err:
        exit_on_known_fault(err, config, verbose)
        raise


def verbose_requested() -> bool:
    """`SCALING_JOB_VERBOSE=1`: set by `python -m jobs --verbose`, or by hand for `scaling
    train` and a study's jobs (submitit passes the environment on)."""
    return os.environ.get(VERBOSE_ENV) == "1"


# --- the four faults -----------------------------------------------------------------------


def _disk_full(code: str, chain: list, config: RunConfig | None) -> Fault:
    where = _where(chain, config)
    free = _free_bytes(where)
    room = f" ({free:,} bytes free)" if free is not None else ""
    what, resume = _checkpoint_story(chain)
    line = (
        f"error: {DISK_FULL} ({code}): {where}{room}{what}; free space there, then rerun the "
        f"job{resume}"
    )
    return Fault(DISK_FULL, where, line)


def _read_only(chain: list, config: RunConfig | None) -> Fault:
    where = _where(chain, config)
    what, resume = _checkpoint_story(chain)
    line = (
        f"error: {READ_ONLY} (EROFS): {where}{what}; remount it read-write or set output_dir "
        f"to a writable folder, then rerun the job{resume}"
    )
    return Fault(READ_ONLY, where, line)


def _tracking(config: RunConfig | None) -> Fault:
    where = "the MLflow tracking server"
    if config is not None:
        from jobs.telemetry.upload import resolve_tracking_uri  # lazy: only on this fault

        where = mask_userinfo(resolve_tracking_uri(config.tracking, Path(config.output_dir)))
    line = (
        f"error: {TRACKING}: {where}: start it, or point tracking.tracking_uri "
        "(MLFLOW_TRACKING_URI) at one that answers, then rerun the job"
    )
    return Fault(TRACKING, where, line)


def _data(err: BaseException, config: RunConfig | None) -> Fault:
    detail = " ".join(str(err).split()) or type(err).__name__
    where = str(config.data.path) if config is not None else "the prepared data"
    if where not in detail:
        detail = f"{where}: {detail}"
    if "prepare-data" not in detail:
        detail = f"{detail}; {_REBUILD}"
    return Fault(DATA, where, f"error: {DATA}: {detail}")


# --- helpers -------------------------------------------------------------------------------


def _chain(err: BaseException) -> Iterator[BaseException]:
    """`err`, then its causes and contexts, each once (as a traceback shows them)."""
    seen: set[int] = set()
    todo = [err]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [e.__cause__, e.__context__]


def _connection_failed(err: BaseException) -> bool:
    """A connection that failed: refused, reset, timed out, a host that does not resolve."""
    if isinstance(err, ConnectionError | TimeoutError):
        return True
    try:
        import requests  # lazy: MLflow's HTTP client, present wherever MLflow is
    except ImportError:
        return False
    return isinstance(err, requests.ConnectionError | requests.Timeout)


def _raised_in(err: BaseException, modules: tuple[str, ...]) -> bool:
    """True if `err` was raised by code of one of `modules` (its innermost frame)."""
    tb = err.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_globals.get("__name__", "") in modules


def _where(chain: list, config: RunConfig | None) -> str:
    """The folder a checkpoint was written to, else the file the OS refused, else output_dir."""
    for e in chain:
        if getattr(e, "root", None) is not None:  # CheckpointWriteError (duck-typed: no torch)
            return str(e.root)
    for e in chain:
        if isinstance(e, OSError) and e.filename:
            return os.fsdecode(e.filename)
    return str(config.output_dir) if config is not None else "?"


def _checkpoint_story(chain: list) -> tuple[str, str]:
    """(": the checkpoint of step N was not written", ": it resumes from step M") for a failed
    checkpoint save (`CheckpointWriteError`), else ("", "")."""
    for e in chain:
        if getattr(e, "root", None) is not None and hasattr(e, "step"):
            resume = f": it resumes from step {e.newest}" if e.newest is not None else ""
            return f": the checkpoint of step {e.step} was not written", resume
    return "", ""


def _free_bytes(where: str) -> int | None:
    path = Path(where)
    while not path.exists() and path != path.parent:  # a file not made, a folder removed
        path = path.parent
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def _keep_traceback(err: BaseException, rank: str) -> str:
    """Write the traceback beside the job's log; say where, or how to see it."""
    rerun = f"--verbose or {VERBOSE_ENV}=1 prints its traceback"
    log = _stderr_file()
    if log is None:
        return f"the error below is a known fault; {rerun}"
    path = log.with_suffix(".traceback" if rank == "0" else f".rank{rank}.traceback")
    try:
        path.write_text("".join(traceback.format_exception(err)))
    except OSError:
        return f"the error below is a known fault; {rerun}"
    return f"the traceback of the error below: {path}"


def _stderr_file() -> Path | None:
    """The regular file stderr writes to (submitit's `<job>_0_log.err`, a redirected log);
    None for a terminal or a pipe."""
    try:
        target = Path(os.readlink("/proc/self/fd/2"))
    except OSError:
        return None
    return target if target.is_file() else None
