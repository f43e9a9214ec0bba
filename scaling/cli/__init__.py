"""The `scaling` command: one entry point whose subcommands live beside the code they drive."""

from __future__ import annotations

import functools

import typer

from data_prep.cli import prepare_data
from foundation.process.quiet import quiet_third_party_output, silence_known_warnings
from jobs.cli import train
from scaling.cli import commands, terminal
from scaling.cli.analyze_command import analyze
from scaling.cli.pilot_cli import pilot
from scaling.cli.plan_command import plan
from scaling.cli.run_command import run
from scaling.cli.status_command import status
from scaling.spec.credentials import tracking_refusal

app = typer.Typer(
    help="Scaling studies: does an attention change still help at scale?",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def _global_options(
    verbose: bool = typer.Option(
        False,
        "--verbose",
        help="Also show the known, harmless third-party warnings, MLflow's INFO logs and "
        "data preparation's progress.",
    ),
) -> None:
    """Scaling studies: does an attention change still help at scale?"""
    if not verbose:
        silence_known_warnings()
        quiet_third_party_output()


app.command("prepare-data")(prepare_data)
app.command("train")(train)
app.command("plan")(plan)
app.command("pilot")(pilot)
app.command("submit")(commands.submit)
app.command("status")(status)
app.command("cancel")(commands.cancel)
app.command("run")(run)


@functools.wraps(analyze)
def _analyze(*args, **kwargs) -> None:
    """`scaling analyze`, with the tracking server's refusals as one line (exit 2), and its
    faults after the retries too (`terminal.EXIT_TRACKING_FAULT`): analyze
    turns its own user errors into one line; a wrong login reaches it as MLflow's exception.
    An unreachable database store is named first, in seconds (`_check_database`)."""
    _check_database(kwargs.get("study"), kwargs.get("tracking_uri"))
    try:
        with terminal.tracking_fault_is_one_line():  # the REST reader's: exit 4, or 2
            analyze(*args, **kwargs)
    except Exception as err:
        if not type(err).__module__.startswith("mlflow."):
            raise
        typer.echo(f"error: {tracking_refusal(err)}", err=True)
        raise typer.Exit(2) from None


app.command("analyze")(_analyze)


def _check_database(study, tracking_uri) -> None:
    """`scaling analyze`: a `postgresql://` (or `mysql://`) store that does not answer is one
    line naming it, exit 2, within seconds (`scaling.spec.loader.check_database`), not MLflow's
    minute and a half of retries and a traceback."""
    from foundation.config import ConfigError  # lazy: `scaling --help` stays fast
    from foundation.secrets import mask_userinfo  # lazy, as above

    uri, where = tracking_uri, "--tracking-uri"
    if uri is None and study is not None:
        from analysis.tables.spec import study_source  # lazy: `scaling --help` stays fast

        try:
            uri, where = study_source(study)[0], str(study)
        except ValueError:
            return  # a study file it cannot read is analyze's to say
    if not isinstance(uri, str) or not uri.startswith(("postgresql", "mysql")):
        return
    from scaling.spec.loader import check_database  # lazy: `scaling --help` stays fast

    try:
        check_database(uri)
    except ConfigError as err:
        message = str(err).replace("study.mlflow.tracking_uri: ", "", 1)
        typer.echo(f"error: {where}: {mask_userinfo(message)}", err=True)
        raise typer.Exit(2) from None


def main() -> None:
    app()
