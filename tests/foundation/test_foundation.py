"""The foundation: config (de)serialisation errors name the field, and the CLI is wired."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Literal

import pytest

from foundation.config import ConfigError, flatten, from_dict, to_dict


@dataclasses.dataclass
class Inner:
    width: int = 4
    kind: Literal["a", "b"] = "a"

    def validate(self) -> None:
        if self.width <= 0:
            raise ValueError("width must be positive; use e.g. 4")


@dataclasses.dataclass
class Outer:
    name: str
    inner: Inner = dataclasses.field(default_factory=Inner)
    rates: list[float] = dataclasses.field(default_factory=list)
    seed: int | None = None


def test_round_trip_and_flatten():
    obj = from_dict(Outer, {"name": "x", "inner": {"width": 8}, "rates": [1, "3e-4"]})
    assert obj == Outer("x", Inner(8, "a"), [1.0, 3e-4])
    assert from_dict(Outer, to_dict(obj)) == obj
    assert flatten(obj)["inner.width"] == 8


@pytest.mark.parametrize(
    "data, fragment",
    [
        ({}, "config.name: required"),
        ({"name": "x", "bogus": 1}, "unknown field(s) bogus"),
        ({"name": "x", "inner": {"kind": "c"}}, "config.inner.kind: 'c' is not one of"),
        ({"name": "x", "inner": {"width": "wide"}}, "config.inner.width: expected an integer"),
        ({"name": "x", "inner": {"width": -1}}, "width must be positive"),
        ({"name": "x", "rates": 3}, "config.rates: expected a list"),
    ],
)
def test_errors_name_the_field(data, fragment):
    with pytest.raises(ConfigError, match=None) as err:
        from_dict(Outer, data)
    assert fragment in str(err.value)


def test_cli_lists_every_command():
    out = subprocess.run(
        [sys.executable, "-m", "scaling", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for command in [
        "prepare-data",
        "train",
        "plan",
        "submit",
        "status",
        "cancel",
        "run",
        "analyze",
    ]:
        assert command in out


def test_every_problem_is_reported_at_once():
    with pytest.raises(ConfigError) as err:
        from_dict(Outer, {"bogus": 1, "inner": {"kind": "c", "width": "wide"}, "rates": 3})
    assert len(err.value.problems) == 5, err.value.problems
    text = str(err.value)
    for fragment in ("config.name: required", "bogus", "inner.kind", "inner.width", "rates"):
        assert fragment in text


def test_children_started_by_any_thread_are_found():
    """`scaling run` starts its local jobs from a worker thread: Linux lists those children
    under that thread, and `kill_tree` must still reach them."""
    import os
    import threading
    import time

    from foundation.process.proc import children

    started: list[subprocess.Popen] = []
    done = threading.Event()

    def start_and_wait() -> None:  # the thread stays alive, so the child stays listed under it
        started.append(subprocess.Popen(["sleep", "60"]))
        done.wait(60)

    worker = threading.Thread(target=start_and_wait)
    worker.start()
    while not started:
        time.sleep(0.01)
    (proc,) = started
    try:
        assert proc.pid in children(os.getpid())
    finally:
        done.set()
        worker.join()
        proc.kill()
        proc.wait()
