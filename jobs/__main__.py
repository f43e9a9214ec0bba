"""`python -m jobs RUN_CONFIG [--verbose]`: the same as `scaling [--verbose] train RUN_CONFIG`."""

from pathlib import Path

import typer

from foundation.process.quiet import silence_known_warnings
from jobs.cli import train


def main(
    run_config: Path = typer.Argument(..., help="Run config (YAML or JSON)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the resolved config and stop."),
    verbose: bool = typer.Option(
        False, "--verbose", help="Also show the known, harmless third-party warnings."
    ),
) -> None:
    """Train one run from a run-config file (see `scaling train --help`)."""
    if not verbose:
        silence_known_warnings()
    train(run_config, dry_run)


if __name__ == "__main__":
    typer.run(main)
