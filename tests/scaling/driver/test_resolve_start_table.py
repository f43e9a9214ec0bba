"""A rerun of `--resolve` judges look 0 on the study as it stood (issue 61): the runs of cells an
earlier call's extensions bought, and trained, are left out of look 0's table
(`scaling.driver.resolve._Path.start_table`), so the rerun decides the same first extension and
does not count the extension's runs at the look before they were bought. The end-to-end test
interrupts before the extension trains; here its cells have runs.
"""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

import scaling.driver.resolve as resolve_driver


def _path(looks: list[dict]) -> resolve_driver._Path:
    """A `_Path` holding only what `start_table` reads: resolve.json's looks (no study file)."""
    here = object.__new__(resolve_driver._Path)
    here.state = {"plan": {}, "looks": looks, "path": None}
    here.study = None
    return here


def test_look_0_leaves_out_every_bought_cell_that_has_a_run(monkeypatch) -> None:
    looks = [
        {"look": 0, "words": {"nonlinear": "undetected"}},
        {"look": 1, "cells": [{"cell_id": "s-seed3"}, {"cell_id": "s-seed4"}]},
        {"look": 2, "cells": [{"cell_id": "s-lr2"}, {"cell_id": "s-lr3"}]},  # s-lr3: no run yet
    ]
    runs = {  # the study's cells with a run: the grid's, look 1's and one of look 2's
        "grid-a": SimpleNamespace(run_id="r-a"),
        "grid-b": SimpleNamespace(run_id="r-b"),
        "s-seed3": SimpleNamespace(run_id="r-3"),
        "s-seed4": SimpleNamespace(run_id="r-4"),
        "s-lr2": SimpleNamespace(run_id="r-lr2"),
    }
    ids = ["r-a", "r-3", "r-b", "r-lr2", "r-4", "r-other"]
    table = pd.DataFrame({"run_id": ids, "seed": range(len(ids))})
    start = _start(monkeypatch, looks, runs, table)
    assert list(start["run_id"]) == ["r-a", "r-b", "r-other"]  # the study as it stood
    assert list(start.index) == [0, 1, 2]

    # before any extension was bought, look 0 reads every run
    assert list(_start(monkeypatch, [looks[0]], runs, table)["run_id"]) == list(table["run_id"])


def _start(monkeypatch, looks, runs, table) -> pd.DataFrame:
    monkeypatch.setattr(resolve_driver, "cell_runs", lambda _study: runs)
    here = _path(looks)
    monkeypatch.setattr(here, "table", lambda: table)
    return here.start_table()
