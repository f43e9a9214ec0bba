"""`scaling train RUN_CONFIG`: train one cell from a run-config file (any launcher)."""

from __future__ import annotations

import os
from pathlib import Path

import typer


def train(
    run_config: Path = typer.Argument(..., help="Run config (YAML or JSON)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the resolved config and stop."),
) -> None:
    """Train one run from a run-config file.

    Launch with `torchrun --nproc-per-node N scaling train cfg.yaml` (or under Slurm) for
    TP x PP x DP = N processes; a rerun resumes from the newest checkpoint in output_dir.
    A known fault (a full disk, a read-only file system, an unreachable tracking server,
    damaged data) ends it with one `error:` line and exit 3; `SCALING_JOB_VERBOSE=1` (what
    `python -m jobs --verbose` sets) adds the traceback (`jobs.faults`).
    """
    import yaml

    # lazy: `python -m jobs --help` imports only typer
    from foundation.config import ConfigError, to_dict
    from jobs.config import load_run_config  # lazy: the CLI registers commands cheaply

    try:
        config = load_run_config(run_config)
    except ConfigError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from err
    if dry_run:
        typer.echo(yaml.safe_dump(to_dict(config), sort_keys=False))
        return
    from jobs.loop.trainer import train as run_training  # lazy: torch and megatron-core

    # lazy: torch
    from models.runtime import launched_world_size

    try:
        config.check_world_size(launched_world_size())
    except ConfigError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from err
    from jobs.faults import reporting_known_faults  # lazy, as above

    with reporting_known_faults(config):  # a full disk, ...: one line and exit 3, no traceback
        result = run_training(config)
    _skip_exit_teardown()
    if os.environ.get("RANK", "0") != "0":
        return  # one line per run, from rank 0
    typer.echo(
        f"{config.name}: {result.status} after {result.steps} steps, "
        f"final val loss {result.final_val_loss:.6f}"
    )


def _skip_exit_teardown() -> None:
    """Let the process exit at once once training has returned.

    After a 1,000-step run `python -m jobs` took 8-12 s to exit: the interpreter's final
    garbage collections walked the ~700k objects torch and megatron leave behind, and gloo's
    process group, freed among them, joined its threads. Everything that must reach disk or
    MLflow is closed by now (tracker, checkpoints, result.json), so freezing the live objects
    out of the collector's reach loses nothing and the exit takes a fraction of a second.
    """
    import gc

    gc.freeze()
