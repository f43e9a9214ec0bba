"""Importable worker functions for `run_ranks` (spawned processes need module-level callables)."""

from __future__ import annotations

from typing import Any


def train_ranks(rank: int, world_size: int, configs: list[dict]) -> list[dict[str, Any]]:
    """Train each config in turn on this rank; return each RunResult as a dict."""
    from foundation.config import from_dict
    from jobs.config import RunConfig
    from jobs.trainer import train

    return [dict(train(from_dict(RunConfig, c, where="run")).__dict__) for c in configs]


def preempt_then_resume(rank: int, world_size: int, config: dict) -> list[dict[str, Any]]:
    """Train with the stop flag already set (stops and saves after step 1), then resume."""
    import threading

    from foundation.config import from_dict
    from jobs.config import RunConfig
    from jobs.trainer import train

    cfg = from_dict(RunConfig, config, where="run")
    stop = threading.Event()
    stop.set()
    first = train(cfg, stop=stop)
    second = train(cfg)
    return [dict(first.__dict__), dict(second.__dict__)]
