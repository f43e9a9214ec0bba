"""Every run of a search, read page by page as one consistent view: no run twice, none missed.

MLflow pages `runs/search` by offset (the page token is base64 of `{"offset": N}`, the SQL
store's and the file store's alike), over the runs ordered by start time, newest first. A run
created or deleted while the pages are read moves every later run by one: a run created between
two pages showed the previous page's last run again (`analyze` counted 8 runs as 11), a run
deleted skipped one (`submit` gave a finished cell a second run). Both happen in practice: a
cell that starts deletes its SCHEDULED run and creates another.

So each page after the first is asked from one run earlier than the server's token says, and
must begin with the run the previous page ended with: then the runs before the boundary are the
ones already read, and the two pages join without a gap or an overlap. A page that does not
begin so, or a run seen twice, means the runs moved: the whole search is read again, up to
`READS` times. A run that exists for the whole read is then returned exactly once; one created
or deleted meanwhile is returned as it was before or after the change. A server whose tokens
are not offsets (another implementation) is read twice and trusted when both reads name the
same runs.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Any, TypeVar

from foundation.secrets import redact_uri

__all__ = ["READS", "RunsMoved", "read_all", "client_pages"]

READS = 4  # whole reads of a search before giving up on runs that keep moving
Run = TypeVar("Run")
# fetch(page token or None, max results) -> (the page's runs, the next page token or None)
Fetch = Callable[[str | None, int], tuple[list[Any], str | None]]


class RunsMoved(RuntimeError):
    """The runs kept changing while they were read (`READS` whole reads); str: one line."""


def read_all(fetch: Fetch, run_id: Callable[[Run], str], page: int, what: str) -> list[Run]:
    """Every run of the search `fetch` pages (module docstring), in the server's order.
    `what` names the search for the error: RunsMoved after `READS` reads that did not hold."""
    named = None  # the run ids of an earlier whole read that could not be checked page by page
    for _ in range(READS):
        runs, checked = _read_once(fetch, run_id, page)
        if runs is None:
            continue  # the runs moved between two pages: read again
        ids = [run_id(r) for r in runs]
        if checked or set(ids) == named:
            return runs
        named = set(ids)
    raise RunsMoved(
        f"{what}: the runs kept changing while they were read ({READS} reads, runs created or "
        "deleted between pages each time); run the command again"
    )


def client_pages(client: Any, exp_id: str, filter_string: str, page: int = 1000) -> list[Any]:
    """Every run of `exp_id` matching `filter_string` through an MlflowClient (any store), as
    `read_all` reads them: RunsMoved naming the store (its login masked) when they kept
    moving."""

    def fetch(token: str | None, max_results: int) -> tuple[list[Any], str | None]:
        found = client.search_runs(
            [exp_id], filter_string=filter_string, max_results=max_results, page_token=token
        )
        return list(found), found.token or None

    where = f"the tracking store {redact_uri(str(getattr(client, 'tracking_uri', '')))}"
    return read_all(fetch, lambda run: run.info.run_id, page, where)


def _read_once(fetch: Fetch, run_id: Callable[[Any], str], page: int) -> tuple[list | None, bool]:
    """(the runs of one pass over the pages, whether every page boundary was checked); None
    for the runs when they moved during the pass."""
    runs: list = []
    seen: set[str] = set()
    token: str | None = None
    start: int | None = 0  # the offset `token` asks for (None: a token of another form)
    anchor: str | None = None  # the run the next page must begin with
    checked = True
    while True:
        items, next_token = fetch(token, page + (anchor is not None))
        items = list(items)
        if anchor is not None:
            if not items or run_id(items[0]) != anchor:
                return None, False  # runs before this page were created or deleted
            fresh = items[1:]
        else:
            fresh = items
        for item in fresh:
            rid = run_id(item)
            if rid in seen:
                return None, False  # a run on two pages: the offsets moved
            seen.add(rid)
            runs.append(item)
        if not next_token:
            return runs, checked
        offset = _offset(next_token)
        if offset is None or start is None or not items or offset != start + len(items):
            checked = False  # not an offset token we can step back from: trusted by a re-read
            token, start, anchor = next_token, offset, None
            continue
        token, start, anchor = _token(offset - 1), offset - 1, run_id(items[-1])


def _offset(token: str) -> int | None:
    """The offset an MLflow page token holds; None for a token of another form."""
    try:
        data = json.loads(base64.b64decode(token, validate=True))
    except (ValueError, binascii.Error, TypeError):
        return None
    if isinstance(data, dict) and set(data) == {"offset"} and type(data["offset"]) is int:
        return data["offset"]
    return None


def _token(offset: int) -> str:
    """The page token of `offset`, as MLflow writes it (`SearchUtils.create_page_token`)."""
    return base64.b64encode(json.dumps({"offset": offset}).encode()).decode()
