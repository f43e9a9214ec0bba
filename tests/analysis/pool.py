"""Synthetic studies side by side: each is a pure function of its arguments (its generator's
seed among them), so what a test measures is the same whatever the number of workers.

One worker per core (the analysis is single-threaded Python and small fits); the workers are
spawned, not forked, so none inherits a copy of the parent's threads or of torch.
"""

from __future__ import annotations

import atexit
import functools
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

MAX_WORKERS = 8


def workers() -> int:
    """The cores this process may use, at most `MAX_WORKERS`."""
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))


def map_studies(fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
    """`fn` over `items` in order, on `workers()` processes (in this one if there is one core).

    `fn` must be a module-level function (it is pickled by name)."""
    items = list(items)
    if workers() == 1 or len(items) < 2:
        yield from map(fn, items)
        return
    yield from _pool().map(fn, items, chunksize=max(1, len(items) // (8 * workers())))


@functools.cache
def _pool() -> ProcessPoolExecutor:
    """One pool per test process, kept for its every replay: a spawned worker pays ~1.4 s of
    imports (pandas, SciPy, the analysis), and a module runs several replays. Shut at exit."""
    pool = ProcessPoolExecutor(workers(), mp_context=multiprocessing.get_context("spawn"))
    atexit.register(pool.shutdown, cancel_futures=True)
    return pool
