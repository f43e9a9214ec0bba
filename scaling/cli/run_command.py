"""`scaling run`: a whole study in one command: prepare data, submit, watch, analyze, report.

The command parses and checks, then hands the study to `scaling.driver.run.run_study`; it
shares its checks, locks and views with `submit` and `status` (`scaling.cli.commands`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from scaling.cli.commands import (
    AcceptStaleOpt,
    NewStoreOpt,
    RerunStaleOpt,
    RetryFailedOpt,
    StudyArg,
    _check_builds,
    _check_driver_settings,
    _exit_for,
    _interrupt_is_one_line,
    _load,
    _one_driver,
    _refusal_is_one_line,
    _settle_stale,
    _status_table,
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
) -> None:
    """Run a whole study: prepare data, submit, watch, analyze, report (safe to re-run).

    A failed cell is resubmitted up to the study's `retries` times, then left failed.
    Exit status: 0 when every cell has a result (completed or diverged); 3 when a cell ended
    failed or cancelled (the analysis of the cells that finished is still written; run again,
    with `--retry-failed` for cells given up on, to retry them); 2 for a bad study file.
    """
    from scaling.cli.mlflow_link import mlflow_ui_hint  # lazy: `scaling --help` stays fast
    from scaling.driver.run import run_study  # lazy: `scaling --help` stays fast
    from scaling.looks.sequential_seeds import judged_against  # lazy: `scaling --help` stays fast

    _check_driver_settings()  # before the study is read: nothing prepared or submitted yet
    spec = _load(study, writes=True, new_store=new_store)
    try:
        spec = judged_against(spec, baseline)  # for the whole run, looks included
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--baseline") from None
    _check_builds(study, spec, remember=True)
    with _one_driver(spec), _interrupt_is_one_line(spec), _refusal_is_one_line():
        _settle_stale(spec, rerun_stale, accept_stale)  # it reads MLflow: a driver's, locked
        outcome = run_study(
            spec,
            analyze=analyze,
            out_dir=out,
            say=typer.echo,
            view=_live_bar if sys.stdout.isatty() else None,
            retry_failed=retry_failed,
        )
    _status_table(outcome.study or spec)  # the cells the LR search added too
    if outcome.verdict is not None:
        from analysis.report.terminal import verdict_lines  # lazy: pandas, once there is one

        for line in verdict_lines(outcome.verdict):
            typer.echo(line)
        report = outcome.report_dir
        typer.echo(f"report: {report / 'report.html'} (Markdown: {report / 'report.md'})")
        typer.echo(f"plots and verdict.json: {report}/")
    typer.echo(mlflow_ui_hint(spec.mlflow.tracking_uri, spec.mlflow.experiment))
    if outcome.inconclusive is not None and not outcome.cancelled:
        from scaling.cli.status_view import EXIT_CELLS_FAILED  # lazy: `scaling --help`

        typer.echo(
            f"analysis inconclusive (exit status 3): {outcome.inconclusive}; the cells' "
            "results are kept: fix the cause (`scaling status`), then `scaling run` again",
            err=True,
        )
        _exit_for(outcome.rows)  # failed cells say so first
        raise typer.Exit(EXIT_CELLS_FAILED)
    _exit_for(outcome.rows, cancelled=outcome.cancelled)
