"""The environment variables the docs name, read in one place and checked before a study starts.

A bad value (`SCALING_RENDEZVOUS_TIMEOUT_S=abc`) read only inside each job would fail every cell
of a study, one after the other; `check_documented_settings` reads them all first, in the
command, and raises one ConfigError naming the variable, what it sets and its default.
Torch-free: the CLI checks them before it imports the model stack.
"""

from __future__ import annotations

import os

from foundation.config import ConfigError, seconds_from_env

__all__ = [
    "RENDEZVOUS_ENV",
    "RENDEZVOUS_TIMEOUT_S",
    "WARM_START_ENV",
    "INFERENCE_COST_ENV",
    "rendezvous_timeout_s",
    "switch_from_env",
    "check_documented_settings",
]

RENDEZVOUS_ENV = "SCALING_RENDEZVOUS_TIMEOUT_S"
RENDEZVOUS_TIMEOUT_S = 300.0  # how long the ranks of a job wait for each other at start
WARM_START_ENV = "SCALING_WARM_START"  # "0": local cells start cold (scaling.warmstart.server)
INFERENCE_COST_ENV = "SCALING_INFERENCE_COST"  # "off": no measuring at analysis time


def rendezvous_timeout_s() -> float:
    """How long a job's ranks wait for each other: `SCALING_RENDEZVOUS_TIMEOUT_S`, else 300."""
    return seconds_from_env(
        RENDEZVOUS_ENV, RENDEZVOUS_TIMEOUT_S, "how long a job's ranks wait for each other",
        positive=True,
    )  # fmt: skip


def switch_from_env(name: str, allowed: tuple[str, ...], default: str, what: str) -> str:
    """The value of switch `name` (one of `allowed`), else `default`; anything else (`off` for
    a switch that takes `0`) is a ConfigError, not silently the default."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if raw not in allowed:
        raise ConfigError(
            f"{name}={raw!r}: not one of {', '.join(allowed)}; set it to {what} "
            f"(default {default}), or unset it"
        )
    return raw


def check_documented_settings() -> None:
    """Every documented setting of a study's jobs read once: a ConfigError listing each bad one."""
    problems: list[str] = []
    checks = (
        rendezvous_timeout_s,
        lambda: switch_from_env(WARM_START_ENV, ("0", "1"), "1", "0 to start local cells cold"),
        lambda: switch_from_env(
            INFERENCE_COST_ENV, ("on", "off"), "on", "off to skip measuring inference cost"
        ),
    )
    for check in checks:
        try:
            check()
        except ConfigError as err:
            problems.extend(err.problems)
    if problems:
        raise ConfigError(problems)
