"""`scaling status STUDY`: the study's grid, once or `--watch`ed until no cell is pending.

It shares its loading, locks and table with the other study commands (`scaling.cli.terminal`);
once, it is `Study.status`; `--watch`, `Study.watch`.
While a variant of the user's own does not import, the grid is still shown, that arm's submitted
cells marked with why (`scaling.cli.status_broken`); `--watch` drives the study and refuses it.
"""

from __future__ import annotations

import contextlib
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from scaling.cli.terminal import (
    StudyArg,
    check_driver_settings,
    exit_for,
    fail,
    load,
    one_driver,
    refusal_is_one_line,
    say_if_no_store,
    status_table,
)

if TYPE_CHECKING:
    from scaling.study import Study


def _load_despite_broken_variants(path: Path) -> tuple[Study, dict[str, str]]:
    """(study, broken) for `status`: the study as `load` reads it and no broken variants; or,
    where it refuses only because variants of the user's own do not import, the study without
    them and each such entry → why (issue 54: the grid is still shown)."""
    from foundation.config import ConfigError  # lazy: `scaling --help` imports only typer
    from scaling.cli.status_broken import broken_variants  # lazy: as above
    from scaling.study import Study  # lazy: as above

    try:
        study = Study.load(path, say=typer.echo)
        broken = {}
    except ConfigError as err:
        broken = broken_variants(path)
        try:
            if not broken:
                raise
            study = Study.load(path, drop_variants=tuple(broken), say=typer.echo)
        except ConfigError:
            typer.echo(f"error: {err}", err=True)
            raise typer.Exit(2) from err
    typer.echo(f"study folder: {study.folder}")
    return study, broken


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
        fail(f"--interval: {interval:g} is not a number of seconds > 0; give e.g. --interval 30")
    if watch:  # it drives: it polls, and submits the LR search's next rounds
        check_driver_settings()
    the_study, broken = (load(study), {}) if watch else _load_despite_broken_variants(study)
    say_if_no_store(the_study)
    if not watch:
        with refusal_is_one_line():  # a damaged state file: one line (issue 63)
            status_table(the_study, the_study.status(refresh=refresh), show_all, broken)
            for line in open_question(the_study):  # an unresolved verdict: what would resolve it
                typer.echo(line)
        return
    if refresh:
        the_study.status(refresh=True)  # rewrites the cache the watch then polls through
    # LR search: each round that ends is judged and the next one submitted
    with one_driver(the_study), refusal_is_one_line():
        watched = the_study.watch(view=_watch_view(show_all), poll_s=interval)
    exit_for(watched.rows, cancelled=watched.cancelled)


def open_question(study: Study) -> list[str]:
    """`status`'s lines on an unresolved verdict and a resolve path
    (`scaling.cli.status_view.open_question_lines`), read from the study's verdict.json and
    resolve.json; none before either exists. A damaged one: `BadStateFile` (one line)."""
    from foundation import contract  # lazy: `scaling --help` imports only typer
    from scaling.cli.status_view import open_question_lines  # lazy: as above
    from scaling.state.files.regular import read_json  # lazy: as above
    from scaling.state.files.resolve_state import read_resolve  # lazy: as above

    report = contract.analysis_folder(study.name, study.resolved.spec.output_dir)
    verdict = read_json(report / "verdict.json", "a verdict")
    return open_question_lines(verdict if isinstance(verdict, dict) else None,
                               read_resolve(study.folder))  # fmt: skip


def _watch_view(show_all: bool):
    """How `status --watch` shows a round: on a terminal the counts and ETA redrawn in place,
    then the table; piped, the table at every poll."""
    from scaling.study import Study  # lazy: `scaling --help` stays fast

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
            status_table(Study(study), rows, show_all)

        return live
    return lambda _progress, study: contextlib.nullcontext(
        lambda rows: status_table(Study(study), rows, show_all)
    )
