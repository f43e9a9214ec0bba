"""The study folder's caches and state files, fuzzed (issue 63): every read returns usable data
or one clear error, never another exception.

Each file starts from a valid document as its writer writes it, then is damaged, seeded: cut
short, bytes garbled, not UTF-8, a value of another type, a subtree wrapped in another level,
nested past Python's stack, or replaced by a directory, a FIFO or a link. The clear error is a
ValueError (a ConfigError or `foundation.atomic.UnsafePath`: the commands print it as one line)
whose one-line message starts with the file's path. No MLflow server is needed.
"""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from scaling.costs import build_check
from scaling.state import run_cache
from scaling.state.files import cancel_mark, job_records, look_state, search_state
from tests.scaling.state.test_state_file_fifo import fifo_probe

CASES_PER_FILE = 60  # + 5 of other kinds of file: 6 files, 390 cases
KEY = {"tracking_uri": "http://x", "experiment_id": "1", "study": "tiny"}
RUN = {
    "cell_id": "c1", "run_id": "r1", "status": "FINISHED", "outcome": "completed",
    "final_val_loss": 3.5, "last_val_loss": 3.5, "start_time": 1, "config_hash": "h",
    "select_loss": None, "code_digest": None, "code_accepted": None, "code_files": None,
}  # fmt: skip
LOOK = dict.fromkeys(look_state._LOOK_KEYS, 1)
ADDED = {"variant": "gated", "size": "30K", "tokens": 3072.0, "lr": 0.001, "seeds": [0, 1],
         "round": 1, "reason": "at the grid's edge"}  # fmt: skip
CHECKED = {"variant": "v", "num_layers": 1, "hidden_size": 48, "num_params": 10,
           "forward_flops_per_token": 20}  # fmt: skip


def _is_records(out) -> bool:
    return all(isinstance(r, job_records.JobRecord) for r in out.values())


def _is_search(out) -> bool:
    return all(isinstance(a, search_state.AddedLR) for a in out.added) and all(
        isinstance(n, str) for n in out.open_arms + out.stopped_arms + out.broken_laws
    )


def _is_looks(out) -> bool:
    return all(isinstance(look, dict) for look in out["looks"])


def _is_cache(out) -> bool:
    return out is None or all(isinstance(e, run_cache.Entry) for e in out[0].values())


def _is_mark(out) -> bool:
    return out is None or (
        isinstance(out["at"], str) and all(isinstance(c, str) for c in out["cells"])
    )


def _is_checks(out) -> bool:
    return all(isinstance(k, str) and isinstance(r, dict) for k, r in out.items())


# file name, a valid document, its reader (folder -> data), what usable data looks like
FILES: dict[str, tuple[str, object, Callable[[Path], object], Callable[[object], bool]]] = {
    "jobs": (
        job_records.RECORDS,
        {
            "c1": {
                "cell_id": "c1",
                "executor": "local",
                "job_id": "12",
                "submitted_at": 1.5,
                "failures": 0,
            }
        },  # fmt: skip
        job_records.read_records,
        _is_records,
    ),
    "lr_search": (
        search_state.STATE_FILE,
        {
            "added": [ADDED],
            "ended": False,
            "open_arms": ["gated"],
            "stopped_arms": [],
            "broken_laws": [],
        },  # fmt: skip
        search_state.read_state,
        _is_search,
    ),
    "looks": (
        look_state.LOOKS_FILE,
        {"design": {"start": 2}, "looks": [LOOK]},
        look_state.read_looks,
        _is_looks,
    ),  # fmt: skip
    "mlflow_runs": (
        run_cache.CACHE_NAME,
        {"version": run_cache.VERSION, "key": KEY, "finished": {"r1": RUN}, "unfinished": ["r2"]},
        lambda folder: run_cache._load(folder / run_cache.CACHE_NAME, KEY),
        _is_cache,
    ),
    "cancelled": (
        cancel_mark.CANCEL_FILE,
        {"at": "noon", "cells": ["c1"]},
        cancel_mark.read_cancel_mark,
        _is_mark,
    ),  # fmt: skip
    "build_checks": (
        build_check.BUILD_CHECKS,
        {"version": build_check.VERSION, "passed": {"k": CHECKED}},
        build_check._passed,
        _is_checks,
    ),
}

ODD = [None, True, 0, -1, 2.5, 1e308, "", "x", [], {}, [1, "a"], {"a": None}]


def _paths(doc, at=()) -> list[tuple]:
    """Every place in `doc` (a path of keys and indexes), the root included."""
    out = [at]
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    )
    for key, value in items:
        out += _paths(value, (*at, key))
    return out


def _replace(doc, at: tuple, new):
    if not at:
        return new
    copy = json.loads(json.dumps(doc))
    parent = copy
    for key in at[:-1]:
        parent = parent[key]
    parent[at[-1]] = new
    return copy


def _get(doc, at: tuple):
    for key in at:
        doc = doc[key]
    return doc


def _damaged(rng: random.Random, doc) -> bytes:
    """One seeded damage of `doc`'s JSON."""
    text = json.dumps(doc).encode()
    how = rng.randrange(7)
    if how == 0:  # cut short
        return text[: rng.randrange(len(text))]
    if how == 1:  # garbled bytes
        data = bytearray(text)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    if how == 2:  # not UTF-8
        return text[:5] + b"\xff\xfe" + text[5:]
    place = rng.choice(_paths(doc))
    if how == 3:  # a value of another type
        return json.dumps(_replace(doc, place, rng.choice(ODD))).encode()
    if how == 4:  # a subtree wrapped in another level
        inner = _get(doc, place)
        return json.dumps(_replace(doc, place, rng.choice([[inner], {"x": inner}]))).encode()
    if how == 5:  # a key removed or added
        tree = _get(doc, place)
        if isinstance(tree, dict) and tree:
            smaller = {k: v for k, v in tree.items() if k != rng.choice(list(tree))}
            return json.dumps(_replace(doc, place, smaller)).encode()
        return json.dumps(_replace(doc, place, {"extra": 1})).encode()
    return b"[" * rng.choice([10, 5000, 200_000])  # nested past the stack, or cut short


def _plant_other(path: Path, kind: int, valid: bytes) -> None:
    """A directory, or a link (to a valid file, to nothing, to a directory)."""
    if kind == 0:
        path.mkdir()
    elif kind != 1:  # 1: a FIFO, made by `fifo_probe`
        target = path.parent / "target"
        if kind == 2:
            target.write_bytes(valid)
        elif kind == 4:
            target.mkdir()
        path.symlink_to(target)


@pytest.mark.parametrize("which", sorted(FILES))
def test_every_damaged_file_reads_as_data_or_one_clear_error(tmp_path, which):
    name, doc, read, usable = FILES[which]
    rng = random.Random(f"issue 63 {which}")
    valid = json.dumps(doc).encode()
    outcomes = {"data": 0, "error": 0}
    for case in range(CASES_PER_FILE + 5):
        folder = tmp_path / str(case)
        folder.mkdir()
        path = folder / name
        if case < CASES_PER_FILE:
            path.write_bytes(valid if case == 0 else _damaged(rng, doc))
        else:
            _plant_other(path, case - CASES_PER_FILE, valid)
        fifo = case == CASES_PER_FILE + 1
        with fifo_probe(path) if fifo else contextlib.nullcontext([]) as opened:
            try:
                out = read(folder)
            except ValueError as err:
                message = str(err)
                assert message.startswith(str(path)) and "\n" not in message, (case, message)
                outcomes["error"] += 1
            else:
                assert usable(out), (case, path.read_bytes()[:200], out)
                outcomes["data"] += 1
        assert opened == [], (case, "the FIFO was opened for reading")
    assert outcomes["data"] >= 1 and outcomes["error"] + outcomes["data"] == CASES_PER_FILE + 5
