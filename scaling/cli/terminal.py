"""What the `scaling` commands share: loading a study or refusing in one line, the locks and
refusals, the tables, the exit codes.

Each command (`scaling.cli.commands`: submit, cancel; `run_command`, `status_command`,
`plan_command`, `pilot_cli`, `analyze_command`) parses its flags, loads the study here
(`load`: every check runs before anything is written or submitted), calls one verb of
`scaling.study.Study` and prints with what is here. A refusal is one `error:` line and an exit
status, never a traceback. Heavy imports happen inside the functions so `scaling --help` stays
fast.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from scaling.study import Study

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_TRACKING_FAULT",
    "StudyArg",
    "RetryFailedOpt",
    "NewStoreOpt",
    "RerunStaleOpt",
    "AcceptStaleOpt",
    "load",
    "settle_stale",
    "say_if_no_store",
    "one_driver",
    "refusal_is_one_line",
    "tracking_fault_is_one_line",
    "interrupt_is_one_line",
    "print_table",
    "check_driver_settings",
    "check_builds",
    "fail",
    "status_table",
    "exit_for",
]

EXIT_INTERRUPTED = 130
EXIT_TRACKING_FAULT = 4  # the tracking server failed a read for good: no verdict was judged
StudyArg = Annotated[Path, typer.Argument(help="Study spec (YAML or JSON).")]
RetryFailedOpt = Annotated[
    bool,
    typer.Option(help="Also resubmit cells that failed more than `retries` times; count anew."),
]
NewStoreOpt = Annotated[
    bool,
    typer.Option(
        "--new-store",
        help="The study's SQLite store was lost or left broken: move a broken file aside, make "
        "a fresh store and upload the completed cells' results on disk into it.",
    ),
]


RerunStaleOpt = Annotated[
    bool, typer.Option(help="Train again the finished cells whose model code changed since.")
]
AcceptStaleOpt = Annotated[
    bool, typer.Option(help="Keep the results of finished cells whose model code changed since.")
]


def load(
    path: Path,
    check_environment: bool = True,
    announce: bool = True,
    writes: bool = False,
    new_store: bool = False,
    drop_variants: tuple[str, ...] = (),
) -> Study:
    """The study at `path`, resolved and checked (`scaling.study.Study.load`: `writes`,
    `new_store` and `drop_variants` are its), saying its lines here; or one `error:` line and
    exit 2. `announce`: say where the study folder is (relative paths resolve against the
    study file)."""
    from foundation.config import ConfigError  # lazy: `scaling --help` imports only typer
    from scaling.study import Study  # lazy: `scaling --help` stays fast

    # Resolved once here; every command below hands this object on and never re-expands it.
    try:
        study = Study.load(
            path,
            check_environment=check_environment,
            writes=writes,
            new_store=new_store,
            drop_variants=drop_variants,
            say=typer.echo,
        )
    except ConfigError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from err
    if announce:  # relative paths resolve against the study file: say where that led
        typer.echo(f"study folder: {study.folder}")
    return study


def settle_stale(study: Study, rerun_stale: bool, accept_stale: bool) -> None:
    """Refuse to go on while finished cells are stale, unless told to rerun or accept them."""
    try:
        study.settle_stale(rerun_stale, accept_stale)
    except ValueError as err:
        fail(str(err))


def say_if_no_store(study: Study) -> None:
    """A read-only command names the SQLite store the spec points at when it does not exist."""
    from foundation.studypaths import missing_store, missing_store_message  # lazy: fast --help

    store = missing_store(study.resolved.mlflow.tracking_uri)
    if store is not None:
        typer.echo(missing_store_message(store), err=True)


@contextlib.contextmanager
def one_driver(study: Study) -> Iterator[None]:
    """Refuse at once (one line, exit 2) if another process drives this study
    (`scaling.state.files.driver_lock`)."""
    from foundation.config import ConfigError  # lazy: `scaling --help` imports only typer
    from scaling.state.files.driver_lock import (  # lazy: `scaling --help` stays fast
        acquire,
        release,
    )

    try:
        path = acquire(study.folder)
    except ConfigError as err:
        fail(str(err))
    try:
        yield
    finally:
        release(path)


@contextlib.contextmanager
def refusal_is_one_line() -> Iterator[None]:
    """A tracking server that kept refusing the login mid-study (`scaling.state.tracking_refusal`),
    a bad setting of how long it may, or a SQLite store lost mid-study
    (`scaling.state.store_check.StoreLost`, a ConfigError): one `error:` line, exit 2."""
    from foundation.config import ConfigError  # lazy: `scaling --help` imports only typer
    from scaling.state.tracking_refusal import TrackingRefused  # lazy: `scaling --help`

    with tracking_fault_is_one_line():
        try:
            yield
        except (TrackingRefused, ConfigError) as err:
            fail(str(err))


@contextlib.contextmanager
def tracking_fault_is_one_line() -> Iterator[None]:
    """A read of the tracking server that failed for good (`foundation.mlflow_rest`: its
    glitches outlasted the retries, or its runs kept moving while read): one `error:` line
    naming the server, exit `EXIT_TRACKING_FAULT`, never a verdict word; a refusal (HTTP 4xx)
    exit 2, as a bad login is."""
    from foundation.mlflow_rest import TrackingError, TrackingUnavailable  # lazy: as above
    from foundation.run_pages import RunsMoved  # lazy: as above

    try:
        yield
    except (TrackingUnavailable, RunsMoved) as err:
        fail(str(err), EXIT_TRACKING_FAULT)
    except TrackingError as err:
        fail(str(err))


@contextlib.contextmanager
def interrupt_is_one_line(study: Study) -> Iterator[None]:
    """Ctrl-C: the cells were cancelled or left pending (`scaling.driver.round_driver`); say what is
    left in one line and exit 130 (128 + SIGINT, as a shell reports it), with no traceback."""
    try:
        yield
    except KeyboardInterrupt:
        from scaling.driver.run import interrupted_line  # lazy: `scaling --help` stays fast

        typer.echo(interrupted_line(study.resolved), err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None


def print_table(title: str, header: list[str], rows: list[list[str]], footer: str = "") -> None:
    """One table on stdout, cell ids never truncated."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, caption=footer or None)
    for name in header:
        table.add_column(name, no_wrap=True)
    for row in rows:
        table.add_row(*row)
    # never truncate cell ids: widen past the terminal (or the 80 columns of a pipe) if needed
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]
    console = Console()
    console.width = max(console.width, sum(widths) + 3 * len(widths) + 1)
    console.print(table)


def check_driver_settings() -> None:
    """The driver's and its jobs' environment settings (`SCALING_POLL_S`,
    `SCALING_LOGIN_GIVE_UP_S`, `foundation.env_settings`: `SCALING_RENDEZVOUS_TIMEOUT_S` ...): a
    bad value is one `error:` line naming it and its default, exit 2, before anything starts
    (read only inside each job, it would fail every cell)."""
    from foundation.config import ConfigError  # lazy: `scaling --help` imports only typer
    from foundation.env_settings import check_documented_settings  # lazy: as above
    from foundation.mlflow_rest import backoff_s, request_timeout_s  # lazy: as above
    from scaling.driver.watcher import poll_seconds  # lazy: `scaling --help` stays fast
    from scaling.state.tracking_refusal import refusal_give_up_s  # lazy: as above

    problems: list[str] = []
    checks = (poll_seconds, refusal_give_up_s, request_timeout_s, backoff_s)
    for check in (*checks, check_documented_settings):
        try:
            check()
        except ConfigError as err:
            problems.extend(err.problems)
    if problems:
        fail("; ".join(problems))


def check_builds(path: Path, study: Study, remember: bool = False) -> list[str]:
    """Each arm of the user's own built once, tiny, with the counts it declares (one child
    process), before anything is prepared or submitted: `plan`, `run`, `submit` and `pilot`
    alike, so a shape bug is one line here, not a failed attempt per cell. The line names the
    study file, the arm and the variant's own file. Returns what was checked, one line an arm
    (what `plan` prints). A build that passed with the same code and config is not repeated
    (`scaling.costs.build_check`); `remember`: `submit` and `run` record the ones that pass."""
    try:
        return study.check_builds(remember=remember)
    except ValueError as err:
        fail(f"{path}: {err}")
        raise  # fail exits


def fail(message: str, code: int = 2) -> None:
    """One `error:` line (a URI's login masked) and exit `code`."""
    from foundation.secrets import mask_userinfo  # a message may quote a URI

    typer.echo(f"error: {mask_userinfo(message)}", err=True)
    raise typer.Exit(code)


def status_table(study: Study, rows=None, show_all: bool = False, broken=None) -> None:
    """Print the grid (a summary for large ones: `scaling.cli.status_view`); `rows` from a poll
    that already read them, else read now. `broken`: variants whose file does not import (entry
    → why): their submitted cells are listed with why, and a warning says so
    (`scaling.cli.status_broken`)."""
    from scaling.cli.status_view import CELL_HEADER, status_tables  # lazy: `scaling --help`

    rows = study.status() if rows is None else rows
    tables = status_tables(study.name, rows, show_all)
    if broken:
        from scaling.cli.status_broken import import_note, unloadable_rows  # lazy: as above

        extra = unloadable_rows(study.resolved, broken)
        title, header, lines, footer = tables[0]
        if header == CELL_HEADER:
            tables[0] = (title, header, lines + extra, footer)
    for title, header, lines, footer in tables:
        print_table(title, header, lines, footer)
    for entry, message in (broken or {}).items():
        typer.echo(
            f"warning: variant {entry!r}: {import_note(message)}; its cells are not shown as "
            "trained, failed or pending until it imports again (run, submit and analyze refuse "
            "the study meanwhile)"
        )
    from scaling.lr_search.extend_grid import status_lines  # lazy: `scaling --help` stays fast

    for line in status_lines(study.resolved, rows):  # LR search: round, best LR per arm, open arms
        typer.echo(line)
    from scaling.looks.sequential_seeds import status_lines as look_lines  # lazy, as above

    for line in look_lines(study.resolved):  # sequential seeds: the latest look and why it goes on
        typer.echo(line)
    from scaling.state.files.cancel_mark import cancel_line, read_cancel_mark  # lazy, as above

    mark = read_cancel_mark(study.folder)
    if mark is not None:
        typer.echo(cancel_line(mark))


def exit_for(rows, cancelled: bool = False) -> None:
    """Exit `EXIT_CELLS_FAILED` (3) if a cell ended failed or cancelled, or `scaling cancel`
    stopped the study; `EXIT_NOT_RUNNING` (5) if cells are only left pending, with the line
    that says which (`scaling.cli.status_view.exit_words`)."""
    from scaling.cli.status_view import EXIT_CELLS_FAILED, exit_words  # lazy: `scaling --help`

    if cancelled:
        typer.echo(
            "the study was cancelled (exit status 3); `scaling run` or `scaling submit` goes on",
            err=True,
        )
        raise typer.Exit(EXIT_CELLS_FAILED)
    code, line = exit_words(rows)
    if code:
        typer.echo(line, err=True)
        raise typer.Exit(code)
