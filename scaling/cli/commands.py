"""`scaling submit | cancel STUDY`: each parses, calls one verb of `scaling.study.Study`, prints.

`scaling run` is `scaling.cli.run_command`, `status` is `scaling.cli.status_command`, `plan` is
`scaling.cli.plan_command`, `pilot` is `scaling.cli.pilot_cli`, `analyze` is
`scaling.cli.analyze_command`; what they all share (loading, locks, refusals, tables, exit codes)
is `scaling.cli.terminal`. Heavy imports happen inside the commands so `scaling --help` stays
fast.
"""

from __future__ import annotations

import typer

from scaling.cli.terminal import (
    AcceptStaleOpt,
    NewStoreOpt,
    RerunStaleOpt,
    RetryFailedOpt,
    StudyArg,
    check_builds,
    check_driver_settings,
    interrupt_is_one_line,
    load,
    one_driver,
    refusal_is_one_line,
    settle_stale,
    status_table,
)

__all__ = ["submit", "cancel"]


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
    check_driver_settings()  # before the study is read: nothing prepared or submitted yet
    the_study = load(study, writes=True, new_store=new_store)
    check_builds(study, the_study, remember=True)
    with one_driver(the_study), interrupt_is_one_line(the_study), refusal_is_one_line():
        settle_stale(the_study, rerun_stale, accept_stale)  # it reads MLflow: a driver's, locked
        # afterwards `the_study` has the cells the LR-search rounds added meanwhile
        result = the_study.submit(retry_failed=retry_failed)
    mlflow = the_study.resolved.mlflow
    typer.echo(
        f"study {the_study.name}: submitted {len(result.submitted)} cell(s), skipped "
        f"{len(result.skipped)}; MLflow parent run {result.parent_run_id} in experiment "
        f"{mlflow.experiment!r} at {mlflow.tracking_uri}"
    )
    status_table(the_study)


def cancel(study: StudyArg) -> None:
    """Stop the study: cancel its running and pending jobs (their MLflow runs and the parent
    become KILLED) and mark it cancelled, so that no `scaling run` or `status --watch` still
    polling starts its next round; `scaling run` or `scaling submit` goes on."""
    the_study = load(study)
    result = the_study.cancel()
    if result.ended_as is not None:
        ended = result.ended_as
        typer.echo(f"study {the_study.name}: already ended {ended}, no job live; nothing to cancel")
        return
    typer.echo(f"study {the_study.name}: cancelled {len(result.cells)} job(s)")
    for cid in result.cells:
        typer.echo(f"  {cid}")
    typer.echo("no further cells start until `scaling run` or `scaling submit` goes on")
