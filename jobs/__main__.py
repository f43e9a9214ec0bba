"""`python -m jobs RUN_CONFIG [--verbose]`: the same as `scaling [--verbose] train RUN_CONFIG`
(there, a known fault's traceback shows with `SCALING_JOB_VERBOSE=1`: `jobs.faults`)."""

import os
from pathlib import Path

import typer

from foundation.process.quiet import silence_known_warnings
from jobs.cli import train
from jobs.faults import VERBOSE_ENV


def main(
    run_config: Path = typer.Argument(..., help="Run config (YAML or JSON)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the resolved config and stop."),
    verbose: bool = typer.Option(
        False,
        "--verbose",
        help="Also show the known, harmless third-party warnings, and the traceback of a known "
        "fault (a full disk, ...), which is otherwise one line.",
    ),
) -> None:
    """Train one run from a run-config file (see `scaling train --help`)."""
    if verbose:
        os.environ[VERBOSE_ENV] = "1"  # a known fault's traceback too (`jobs.faults`)
    else:
        silence_known_warnings()
    train(run_config, dry_run)


if __name__ == "__main__":
    typer.run(main)
