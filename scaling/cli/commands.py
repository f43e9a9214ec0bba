"""Study commands: `scaling submit | cancel STUDY`, and what every command shares.

`scaling run` is `scaling.cli.run_command`, `status` is `scaling.cli.status_command`, `plan` is
`scaling.cli.plan_command`, `analyze` is `scaling.cli.analyze_command`; they use the loading,
locks and views defined here.

Each command parses, loads the study (every check runs before anything is written or
submitted), calls one function of `scaling.costs.plan` / `scaling.driver.round_driver`, and prints a
table. Heavy imports happen inside the commands so `scaling --help` stays fast.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

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


def _load(
    path: Path, check_environment: bool = True, announce: bool = True, writes=False, new_store=False
):
    """The study at `path`, resolved and checked, or one `error:` line and exit 2. `writes`:
    the command makes folders and a store, so they must be writable by this user first (a
    read-only `status` of someone else's study need not be). `new_store`: a lost or broken
    SQLite store is replaced first (`scaling.state.store_check.adopt_new_store`)."""
    from foundation.config import ConfigError  # lazy: `scaling --help` imports only typer
    from scaling.driver.environment import check_study_environment, load_study_spec  # lazy
    from scaling.spec.places import check_places  # lazy, as above

    # Resolved once here; every command below hands this object on and never re-expands it.
    try:
        spec = load_study_spec(path, check_environment=check_environment and not new_store)
        if new_store:
            from scaling.state.store_check import adopt_new_store  # lazy: as above

            adopt_new_store(spec, typer.echo)
            try:
                check_study_environment(spec)
            except ConfigError as err:
                raise err.prefixed(str(path)) from None
        if writes:
            try:
                check_places(spec.spec)
            except ConfigError as err:
                raise err.prefixed(str(path)) from None
    except ConfigError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from err
    if announce:  # relative paths resolve against the study file: say where that led
        typer.echo(f"study folder: {spec.folder}")
    return spec


def _settle_stale(spec, rerun_stale: bool, accept_stale: bool) -> None:
    """Refuse to go on while finished cells are stale, unless told to rerun or accept them."""
    from scaling.state.stale import settle_from_flags  # lazy: `scaling --help` stays fast

    try:
        settle_from_flags(spec, rerun_stale, accept_stale, say=typer.echo)
    except ValueError as err:
        _fail(str(err))


def _say_if_no_store(spec) -> None:
    """A read-only command names the SQLite store the spec points at when it does not exist."""
    from foundation.studypaths import missing_store, missing_store_message  # lazy: fast --help

    store = missing_store(spec.mlflow.tracking_uri)
    if store is not None:
        typer.echo(missing_store_message(store), err=True)


@contextlib.contextmanager
def _one_driver(spec) -> Iterator[None]:
    """Refuse at once (one line, exit 2) if another process drives this study
    (`scaling.state.files.driver_lock`)."""
    from foundation.config import ConfigError  # lazy: `scaling --help` imports only typer
    from scaling.state.files.driver_lock import (  # lazy: `scaling --help` stays fast
        acquire,
        release,
    )

    try:
        path = acquire(spec.folder)
    except ConfigError as err:
        _fail(str(err))
    try:
        yield
    finally:
        release(path)


@contextlib.contextmanager
def _refusal_is_one_line() -> Iterator[None]:
    """A tracking server that kept refusing the login mid-study (`scaling.state.tracking_refusal`),
    a bad setting of how long it may, or a SQLite store lost mid-study
    (`scaling.state.store_check.StoreLost`, a ConfigError): one `error:` line, exit 2."""
    from foundation.config import ConfigError  # lazy: `scaling --help` imports only typer
    from scaling.state.tracking_refusal import TrackingRefused  # lazy: `scaling --help`

    with _tracking_fault_is_one_line():
        try:
            yield
        except (TrackingRefused, ConfigError) as err:
            _fail(str(err))


@contextlib.contextmanager
def _tracking_fault_is_one_line() -> Iterator[None]:
    """A read of the tracking server that failed for good (`foundation.mlflow_rest`: its
    glitches outlasted the retries, or its runs kept moving while read): one `error:` line
    naming the server, exit `EXIT_TRACKING_FAULT`, never a verdict word; a refusal (HTTP 4xx)
    exit 2, as a bad login is."""
    from foundation.mlflow_rest import TrackingError, TrackingUnavailable  # lazy: as above
    from foundation.run_pages import RunsMoved  # lazy: as above

    try:
        yield
    except (TrackingUnavailable, RunsMoved) as err:
        _fail(str(err), EXIT_TRACKING_FAULT)
    except TrackingError as err:
        _fail(str(err))


@contextlib.contextmanager
def _interrupt_is_one_line(spec) -> Iterator[None]:
    """Ctrl-C: the cells were cancelled or left pending (`scaling.driver.round_driver`); say what is
    left in one line and exit 130 (128 + SIGINT, as a shell reports it), with no traceback."""
    try:
        yield
    except KeyboardInterrupt:
        from scaling.driver.run import interrupted_line  # lazy: `scaling --help` stays fast

        typer.echo(interrupted_line(spec), err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None


def _print_table(title: str, header: list[str], rows: list[list[str]], footer: str = "") -> None:
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


def _check_driver_settings() -> None:
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
        _fail("; ".join(problems))


def _check_builds(path: Path, spec, remember: bool = False) -> list[str]:
    """Each arm of the user's own built once, tiny, with the counts it declares (one child
    process), before anything is prepared or submitted: `plan`, `run`, `submit` and `pilot`
    alike, so a shape bug is one line here, not a failed attempt per cell. The line names the
    study file, the arm and the variant's own file. Returns what was checked, one line an arm
    (what `plan` prints). A build that passed with the same code and config is not repeated
    (`scaling.costs.build_check`); `remember`: `submit` and `run` record the ones that pass."""
    from scaling.costs.build_check import check_arms_build  # lazy: the model stack

    try:
        return check_arms_build(spec, remember=remember)
    except ValueError as err:
        _fail(f"{path}: {err}")
        raise  # _fail exits


def _fail(message: str, code: int = 2) -> None:
    from foundation.secrets import mask_userinfo  # a message may quote a URI

    typer.echo(f"error: {mask_userinfo(message)}", err=True)
    raise typer.Exit(code)


def submit(
    study: StudyArg,
    retry_failed: RetryFailedOpt = False,
    rerun_stale: RerunStaleOpt = False,
    accept_stale: AcceptStaleOpt = False,
    new_store: NewStoreOpt = False,
) -> None:
    """Submit a study's unfinished cells (finished skipped, failed retried, running left alone).

    On Slurm this returns once the job arrays are queued; with the local executor it runs the
    cells (a few at a time) and returns when they have ended. A cell that failed more than the
    study's `retries` times is left failed until `--retry-failed`. Finished cells whose model
    code changed since (`scaling status`: stale) stop it until `--rerun-stale` or
    `--accept-stale` (docs/variants.md).
    """
    from scaling.driver.round_driver import submit_rounds  # lazy: `scaling --help` stays fast

    _check_driver_settings()  # before the study is read: nothing prepared or submitted yet
    spec = _load(study, writes=True, new_store=new_store)
    _check_builds(study, spec, remember=True)
    with _one_driver(spec), _interrupt_is_one_line(spec), _refusal_is_one_line():
        _settle_stale(spec, rerun_stale, accept_stale)  # it reads MLflow: a driver's, locked
        result = submit_rounds(spec, on_progress=typer.echo, retry_failed=retry_failed)
    spec = _load(study, announce=False)  # with the cells LR-search rounds added meanwhile
    typer.echo(
        f"study {spec.name}: submitted {len(result.submitted)} cell(s), skipped "
        f"{len(result.skipped)}; MLflow parent run {result.parent_run_id} in experiment "
        f"{spec.mlflow.experiment!r} at {spec.mlflow.tracking_uri}"
    )
    _status_table(spec)


def _status_table(spec, rows=None, show_all: bool = False, broken=None) -> None:
    """Print the grid (a summary for large ones: `scaling.cli.status_view`); `rows` from a poll
    that already read them, else read now. `broken`: variants whose file does not import (entry
    → why): their submitted cells are listed with why, and a warning says so
    (`scaling.cli.status_broken`)."""
    from scaling.cli.status_view import CELL_HEADER, status_tables  # lazy: `scaling --help`
    from scaling.state.status import study_status  # lazy: `scaling --help` stays fast

    rows = study_status(spec) if rows is None else rows
    tables = status_tables(spec.name, rows, show_all)
    if broken:
        from scaling.cli.status_broken import import_note, unloadable_rows  # lazy: as above

        extra = unloadable_rows(spec, broken)
        title, header, lines, footer = tables[0]
        if header == CELL_HEADER:
            tables[0] = (title, header, lines + extra, footer)
    for title, header, lines, footer in tables:
        _print_table(title, header, lines, footer)
    for entry, message in (broken or {}).items():
        typer.echo(
            f"warning: variant {entry!r}: {import_note(message)}; its cells are not shown as "
            "trained, failed or pending until it imports again (run, submit and analyze refuse "
            "the study meanwhile)"
        )
    from scaling.lr_search.extend_grid import status_lines  # lazy: `scaling --help` stays fast

    for line in status_lines(spec, rows):  # LR search: round, best LR per arm, open arms
        typer.echo(line)
    from scaling.looks.sequential_seeds import status_lines as look_lines  # lazy, as above

    for line in look_lines(spec):  # sequential seeds: the latest look and why it goes on
        typer.echo(line)
    from scaling.state.files.cancel_mark import cancel_line, read_cancel_mark  # lazy, as above

    mark = read_cancel_mark(spec.folder)
    if mark is not None:
        typer.echo(cancel_line(mark))


def _exit_for(rows, cancelled: bool = False) -> None:
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


def cancel(study: StudyArg) -> None:
    """Stop the study: cancel its running and pending jobs (their MLflow runs and the parent
    become KILLED) and mark it cancelled, so that no `scaling run` or `status --watch` still
    polling starts its next round; `scaling run` or `scaling submit` goes on."""
    from scaling.driver.round_driver import cancel_study  # lazy: `scaling --help` stays fast

    spec = _load(study)
    result = cancel_study(spec)
    if result.ended_as is not None:
        typer.echo(
            f"study {spec.name}: already ended {result.ended_as}, no job live; nothing to cancel"
        )
        return
    typer.echo(f"study {spec.name}: cancelled {len(result.cells)} job(s)")
    for cid in result.cells:
        typer.echo(f"  {cid}")
    typer.echo("no further cells start until `scaling run` or `scaling submit` goes on")
