"""A study's state files written through a transient I/O error (a read-only spell, a full disk).

The driver writes `jobs.json`, `lr_search.json`, `looks.json` and `cancelled.json` in the study
folder while its cells train. A folder that is read-only for a while (a remount, a quota hit, an
administrator's `chmod`) used to raise `OSError` in the thread that starts local cells: the
thread died with a traceback while the watcher went on showing its queued cells forever. Now a
write that fails with `OSError` is tried again, with one line said when it first fails and one
when it succeeds, until `GIVE_UP_S` has passed (then the error is raised: the disk is not coming
back). The cells already running go on meanwhile; they write below the study folder.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

__all__ = ["GIVE_UP_S", "written"]

T = TypeVar("T")
GIVE_UP_S = 3600.0  # a state file unwritable this long: the error is raised
FIRST_WAIT_S = 0.5  # the first wait before trying again; doubled up to MAX_WAIT_S
MAX_WAIT_S = 10.0


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def written(
    write: Callable[[], T],
    path: Path,
    say: Callable[[str], None] | None = None,
    give_up_s: float = GIVE_UP_S,
) -> T:
    """`write()` (which writes `path`), tried again while it raises OSError, up to `give_up_s`."""
    say = say or _stderr
    since = None
    wait = FIRST_WAIT_S
    while True:
        try:
            result = write()
        except OSError as err:
            now = time.monotonic()
            if since is None:
                since = now
                say(
                    f"cannot write {path} ({err.strerror or err}); trying again until it can "
                    f"be written (for up to {give_up_s / 60:.0f} min)"
                )
            if now - since > give_up_s:
                raise
            time.sleep(wait)
            wait = min(2 * wait, MAX_WAIT_S)
            continue
        if since is not None:
            say(f"wrote {path} after {time.monotonic() - since:.0f} s of trying")
        return result
