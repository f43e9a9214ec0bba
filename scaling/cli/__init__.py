"""The `scaling` command: one entry point whose subcommands live beside the code they drive."""

from __future__ import annotations

import functools

import typer

from data_prep.cli import prepare_data
from foundation.process.quiet import quiet_third_party_output, silence_known_warnings
from jobs.cli import train
from scaling.cli import commands
from scaling.cli.analyze_command import analyze
from scaling.cli.pilot_cli import pilot
from scaling.cli.plan_command import plan
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
app.command("status")(commands.status)
app.command("cancel")(commands.cancel)
app.command("run")(commands.run)


@functools.wraps(analyze)
def _analyze(*args, **kwargs) -> None:
    """`scaling analyze`, with the tracking server's refusals as one line (exit 2): analyze
    turns its own user errors into one line; a wrong login reaches it as MLflow's exception."""
    try:
        analyze(*args, **kwargs)
    except Exception as err:
        if not type(err).__module__.startswith("mlflow."):
            raise
        typer.echo(f"error: {tracking_refusal(err)}", err=True)
        raise typer.Exit(2) from None


app.command("analyze")(_analyze)


def main() -> None:
    app()
