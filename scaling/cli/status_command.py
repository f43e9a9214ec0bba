"""`scaling status STUDY`: the study's grid, once or `--watch`ed until no cell is pending.

It shares its loading, locks and table with the other study commands (`scaling.cli.commands`).
While a variant of the user's own does not import, the grid is still shown, that arm's submitted
cells marked with why (`scaling.cli.status_broken`); `--watch` drives the study and refuses it.
"""

from __future__ import annotations

import contextlib
import math
import sys
from pathlib import Path
from typing import Annotated

import typer

from scaling.cli.commands import (
    StudyArg,
    _check_driver_settings,
    _exit_for,
    _fail,
    _load,
    _one_driver,
    _refusal_is_one_line,
    _say_if_no_store,
    _status_table,
)


def _load_despite_broken_variants(path: Path):
    """(study, broken) for `status`: the study as `_load` reads it and no broken variants; or,
    where it refuses only because variants of the user's own do not import, the study without
    them and each such entry → why (issue 54: the grid is still shown)."""
    from foundation.config import ConfigError  # lazy: `scaling --help` imports only typer
    from scaling.cli.status_broken import broken_variants  # lazy: as above
    from scaling.driver.environment import load_study_spec  # lazy: as above

    try:
        spec = load_study_spec(path)
        broken = {}
    except ConfigError as err:
        broken = broken_variants(path)
        try:
            if not broken:
                raise
            spec = load_study_spec(path, drop_variants=tuple(broken))
        except ConfigError:
            typer.echo(f"error: {err}", err=True)
            raise typer.Exit(2) from err
    typer.echo(f"study folder: {spec.folder}")
    return spec, broken


def status(
    study: StudyArg,
    watch: Annotated[
        bool, typer.Option(help="Refresh until no cell is pending or running.")
    ] = False,
    interval: Annotated[float, typer.Option(help="Seconds between refreshes.")] = 30.0,
    show_all: Annotated[
        bool, typer.Option("--all", help="List every cell, also in a large grid.")
    ] = False,
    refresh: Annotated[
        bool,
        typer.Option(
            "--refresh",
            help="Search every MLflow run of the study again (slow on a large study) instead "
            "of trusting the cache of finished runs; for runs deleted in MLflow.",
        ),
    ] = False,
) -> None:
    """Show the study's grid: state, validation loss and job of every cell.

    A grid of more than 100 cells shows counts by state and by (size, variant) and only the
    cells that are neither completed nor pending; `--all` lists every cell. With `--watch`
    the exit status is 3 when a cell ended failed or cancelled, else 0 (2: bad study file).
    Finished runs are cached in the study folder (`mlflow_runs.json`), so a poll asks MLflow
    only for the runs that may have changed; the first poll without that file, and
    `--refresh`, search them all.
    """
    if not 0 < interval < math.inf:  # -1 or 0 would poll without pause, inf never again
        _fail(f"--interval: {interval:g} is not a number of seconds > 0; give e.g. --interval 30")
    if watch:  # it drives: it polls, and submits the LR search's next rounds
        _check_driver_settings()
    spec, broken = (_load(study), {}) if watch else _load_despite_broken_variants(study)
    _say_if_no_store(spec)
    if not watch:
        from scaling.state.status import study_status  # lazy: `scaling --help` stays fast

        with _refusal_is_one_line():  # a damaged state file: one line (issue 63)
            _status_table(spec, study_status(spec, refresh=refresh), show_all, broken)
        return
    if refresh:
        from scaling.state.status import study_status  # lazy: `scaling --help` stays fast

        study_status(spec, refresh=True)  # rewrites the cache the watch then polls through
    from scaling.driver.round_driver import StudyRun  # lazy: `scaling --help` stays fast

    # LR search: each round that ends is judged and the next one submitted
    with _one_driver(spec), _refusal_is_one_line():
        driver = StudyRun(spec, say=typer.echo, view=_watch_view(show_all), poll_s=interval)
        rows = driver.drive(submit_first=False)
        driver.finish(rows)
    _exit_for(rows, cancelled=driver.cancelled() is not None)


def _watch_view(show_all: bool):
    """How `status --watch` shows a round: on a terminal the counts and ETA redrawn in place,
    then the table; piped, the table at every poll."""
    if sys.stdout.isatty():
        from scaling.cli.live import LiveProgress  # lazy: `scaling --help` stays fast

        @contextlib.contextmanager
        def live(progress, study):
            rows = []
            with LiveProgress(progress, len(study.cells)) as display:

                def show(polled):
                    rows[:] = polled
                    display(polled)

                yield show
            _status_table(study, rows, show_all)

        return live
    return lambda _progress, study: contextlib.nullcontext(
        lambda rows: _status_table(study, rows, show_all)
    )
