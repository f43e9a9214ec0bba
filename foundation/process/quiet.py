"""Hide the third-party warnings that every command prints and that mean nothing to a user.

Megatron-core warns on import that Apex and Transformer Engine are missing (it falls back to
torch, which is what a CPU run or a plain CUDA install wants), and on every model config that
its default cuda-graph scope "full" is deprecated (we never capture CUDA graphs). Each command's
entry point calls `silence_known_warnings` once; `--verbose` skips it, so nothing is lost.
Only these messages are matched: an unexpected warning still shows.

MLflow also speaks on its own: INFO logs ("Creating initial MLflow database tables...", alembic's
migrations) and a "View run ... at: URL" line on stdout whenever a run ends.
`quiet_third_party_output` turns those off (through MLflow's own settings, which a user's
exported value overrides) and marks the process not verbose; `--verbose` skips it too.
"""

from __future__ import annotations

import logging
import os
import warnings

__all__ = ["KNOWN_HARMLESS", "silence_known_warnings", "quiet_third_party_output", "verbose"]

# MLflow's own settings, read when it is imported (or when it prints a run's URL)
QUIET_ENV = {"MLFLOW_LOGGING_LEVEL": "WARNING", "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}
QUIET_LOGGERS = ("mlflow", "alembic")
_state = {"verbose": True}

# (message regex, category): matched at the start of the message, as `warnings` does.
KNOWN_HARMLESS: tuple[tuple[str, type[Warning]], ...] = (
    (r"Transformer Engine and Apex are not installed", UserWarning),
    (r"Apex is not installed", UserWarning),
    (r"Transformer Engine is not installed", UserWarning),
    (r"full scope is deprecated", UserWarning),
    (r"The following imports from `dynamic_context.py` will be removed", DeprecationWarning),
    (r"`torch.jit.script_method` is deprecated", DeprecationWarning),
)


def silence_known_warnings() -> None:
    """Ignore the `KNOWN_HARMLESS` warnings in this process (idempotent)."""
    for message, category in KNOWN_HARMLESS:
        warnings.filterwarnings("ignore", message=message, category=category)


def quiet_third_party_output() -> None:
    """Keep MLflow's INFO logs and run URLs off the terminal in this process and its jobs."""
    _state["verbose"] = False
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    for name in QUIET_LOGGERS:  # in case MLflow was imported already
        logging.getLogger(name).setLevel(os.environ["MLFLOW_LOGGING_LEVEL"].upper())


def verbose() -> bool:
    """False once `quiet_third_party_output` ran (a command without `--verbose`)."""
    return _state["verbose"]
