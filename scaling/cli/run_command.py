"""`scaling run`: a whole study in one command: prepare data, submit, watch, analyze, report.

The command parses and checks, then calls one verb, `scaling.study.Study.run`; it shares its
checks, locks and views with `submit` and `status` (`scaling.cli.terminal`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from scaling.cli.terminal import (
    AcceptStaleOpt,
    NewStoreOpt,
    RerunStaleOpt,
    RetryFailedOpt,
    StudyArg,
    check_builds,
    check_driver_settings,
    exit_for,
    fail,
    interrupt_is_one_line,
    load,
    one_driver,
    refusal_is_one_line,
    settle_stale,
    status_table,
)

__all__ = ["run"]


def _live_bar(progress, study):
    """`scaling run`'s view on a terminal: the live bar over the study's cells."""
    from scaling.cli.live import LiveProgress  # lazy: `scaling --help` stays fast

    return LiveProgress(progress, len(study.cells))


def run(
    study: StudyArg,
    analyze: Annotated[bool, typer.Option(help="Fit and judge once every cell has ended.")] = True,
    out: Annotated[
        Path | None, typer.Option(help="Report folder [default: <study folder>/analysis].")
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            help="The arm the others are judged by, at every look and in the report "
            "[default: the study's verdict.baseline]."
        ),
    ] = None,
    retry_failed: RetryFailedOpt = False,
    rerun_stale: RerunStaleOpt = False,
    accept_stale: AcceptStaleOpt = False,
    new_store: NewStoreOpt = False,
    resolve_: Annotated[
        bool,
        typer.Option(
            "--resolve",
            help="Then buy what would resolve an unresolved verdict, extension by extension, "
            "each a look at its spent level, within --budget (docs/studies.md).",
        ),
    ] = False,
    budget: Annotated[
        str | None,
        typer.Option(help="With --resolve: the device-hours it may spend (else resolve.budget)."),
    ] = None,
    max_looks: Annotated[
        str | None, typer.Option(help="With --resolve: at most this many extensions [4].")
    ] = None,
    options: Annotated[
        str | None,
        typer.Option(
            help="With --resolve: the kinds it may buy, comma-separated, of seeds, lr_grid, "
            "lr_edge, size, tokens [every one the study can take]."
        ),
    ] = None,
) -> None:
    """Run a whole study: prepare data, submit, watch, analyze, report (safe to re-run).

    A failed cell is resubmitted up to the study's `retries` times, then left failed.
    Exit status: 0 when every cell has a result (completed or diverged); 3 when a cell ended
    failed or cancelled (the analysis of the cells that finished is still written; run again,
    with `--retry-failed` for cells given up on, to retry them); 2 for a bad study file.
    """
    from scaling.cli.mlflow_link import mlflow_ui_hint  # lazy: `scaling --help` stays fast

    check_driver_settings()  # before the study is read: nothing prepared or submitted yet
    wants = _resolve_flags(resolve_, budget, max_looks, options)  # bad flags: before the read
    the_study = load(study, writes=True, new_store=new_store)
    try:
        the_study = the_study.judged_against(baseline)  # for the whole run, looks included
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--baseline") from None
    if wants is not None:
        _check_resolve(the_study, wants)  # refused: nothing prepared, submitted or written
    check_builds(study, the_study, remember=True)
    if wants is not None:
        _resolve(the_study, wants, rerun_stale, accept_stale)
        return
    with one_driver(the_study), interrupt_is_one_line(the_study), refusal_is_one_line():
        settle_stale(the_study, rerun_stale, accept_stale)  # it reads MLflow: a driver's, locked
        outcome = the_study.run(
            analyze=analyze,
            out_dir=out,
            view=_live_bar if sys.stdout.isatty() else None,
            retry_failed=retry_failed,
        )
    status_table(the_study)  # the cells the LR search added too
    if outcome.verdict is not None:
        from analysis.report.terminal import verdict_lines  # lazy: pandas, once there is one

        for line in verdict_lines(outcome.verdict):
            typer.echo(line)
        report = outcome.report_dir
        typer.echo(f"report: {report / 'report.html'} (Markdown: {report / 'report.md'})")
        typer.echo(f"plots and verdict.json: {report}/")
    mlflow = the_study.resolved.mlflow
    typer.echo(mlflow_ui_hint(mlflow.tracking_uri, mlflow.experiment))
    if outcome.inconclusive is not None and not outcome.cancelled:
        from scaling.cli.status_view import EXIT_CELLS_FAILED  # lazy: `scaling --help`

        typer.echo(
            f"analysis inconclusive (exit status 3): {outcome.inconclusive}; the cells' "
            "results are kept: fix the cause (`scaling status`), then `scaling run` again",
            err=True,
        )
        exit_for(outcome.rows)  # failed cells say so first
        raise typer.Exit(EXIT_CELLS_FAILED)
    exit_for(outcome.rows, cancelled=outcome.cancelled)


def _resolve_flags(resolve_: bool, budget, max_looks, options) -> dict | None:
    """The resolve's flags parsed (None: no --resolve), or one `error:` line and exit 2."""
    from scaling.driver.resolve import ResolveRefused, parse_budget  # lazy: `scaling --help`

    given = [f for f, v in (("--budget", budget), ("--max-looks", max_looks),
                            ("--options", options)) if v is not None]  # fmt: skip
    if not resolve_:
        if given:
            fail(f"{given[0]}: only with --resolve; add --resolve, or drop {given[0]}")
        return None
    try:  # None: the study file's `resolve.budget` (`check_resolve`)
        hours = None if budget is None else parse_budget(budget)
    except ResolveRefused as err:
        fail(str(err))
    looks = None
    if max_looks is not None:
        looks = int(max_looks) if max_looks.strip().isdigit() else 0
        if looks < 1:
            fail(f"--max-looks {max_looks}: give a whole number of extensions, at least 1")
    kinds = None if options is None else tuple(k.strip() for k in options.split(",") if k.strip())
    if kinds is not None and not kinds:
        fail(f"--options {options!r}: name at least one of seeds, lr_grid, lr_edge, size, tokens")
    return {"budget": hours, "max_looks": looks, "kinds": kinds}


def _check_resolve(the_study, wants: dict) -> None:
    from scaling.driver.resolve import ResolveRefused  # lazy: `scaling --help`

    try:
        the_study.resolve(**wants, check_only=True)
    except ResolveRefused as err:
        fail(str(err))


def _resolve(the_study, wants: dict, rerun_stale: bool, accept_stale: bool) -> None:
    """`scaling run --resolve`: the study's cells, then the resolve path; one line per look."""
    with one_driver(the_study), interrupt_is_one_line(the_study), refusal_is_one_line():
        settle_stale(the_study, rerun_stale, accept_stale)
        outcome = the_study.resolve(**wants, view=_live_bar if sys.stdout.isatty() else None)
    status_table(the_study)
    for line in _path_lines(outcome.path):
        typer.echo(line)
    if outcome.verdict is not None:
        from analysis.report.terminal import verdict_lines  # lazy: pandas

        for line in verdict_lines(outcome.verdict):
            typer.echo(line)
        report = outcome.report_dir
        typer.echo(f"report: {report / 'report.html'} (Markdown: {report / 'report.md'})")
    exit_for(outcome.rows)


def _path_lines(path: dict) -> list[str]:
    """The terminal's lines of a resolve path: one per look."""
    from scaling.driver.resolve import looks_words  # lazy: `scaling --help`

    lines = []
    for row in path["looks"]:
        b = row.get("bought")
        what = f"bought {b['kind']} ({b['num_runs']} runs, {b['cost']:.3g} h); " if b else ""
        lines.append(f"look {row['look']} (level {row['level']:.3g}): {what}"
                     f"{looks_words(row['words'])}")  # fmt: skip
    return lines
