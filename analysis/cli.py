"""`scaling analyze --runs-csv FILE` (or `--tracking-uri --experiment --study-name`): a run table
judged by the user's settings, written to `--out`; never a study's verdict.

`scaling analyze STUDY` is `scaling.cli.analyze_command`'s: a study is resolved by scaling's
loader and judged by its own judgement (`scaling.study_judgement.study_judgement`), which analysis
cannot build (it imports nothing from scaling).

User errors (a bad CSV, an unknown baseline) end in one line on stderr naming the file, column
and row or the option to fix, exit status 2, no traceback.
"""

from __future__ import annotations

from pathlib import Path

import typer

from analysis.tables.spec import DEFAULT_BASELINE, DEFAULT_MARGIN_PCT

RESAMPLES_HELP = "parametric bootstrap draws [default: 1000]"
DETECT_HELP = "gain (%) for the power table [default: 0.5]"


def analyze(
    runs_csv: Path | None = typer.Option(None, "--runs-csv", help="analyse this run table"),
    out: Path | None = typer.Option(
        None, "--out", help="output dir [default: results/<csv name or study name>/analysis]"
    ),
    baseline: str | None = typer.Option(
        None,
        "--baseline",
        help="the arm the others are judged by; A,B = per size the stronger of arms A and B "
        f"[default: {DEFAULT_BASELINE}]",
    ),
    tracking_uri: str | None = typer.Option(None, "--tracking-uri", help="MLflow server"),
    experiment: str | None = typer.Option(None, "--experiment", help="MLflow experiment"),
    study_name: str | None = typer.Option(None, "--study-name", help="the runs' study tag"),
    resamples: int | None = typer.Option(None, "--resamples", help=RESAMPLES_HELP),
    seed: int | None = typer.Option(None, "--seed", help="bootstrap RNG seed [default: 0]"),
    detect_gain: float | None = typer.Option(None, "--detect-gain", help=DETECT_HELP),
    margin: float | None = typer.Option(
        None,
        "--margin",
        help="equivalence margin (% of the loss): `none` needs the top-size interval within "
        f"+-margin [default: {DEFAULT_MARGIN_PCT:g}]",
    ),
) -> None:
    """Fit scaling laws per variant and judge whether each variant's gain persists with scale."""
    try:
        analyze_table(
            runs_csv, out, baseline, tracking_uri, experiment, study_name,
            resamples, seed, detect_gain, margin,
        )  # fmt: skip
    except ValueError as err:  # a user error: one line naming what to fix, no traceback
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None


def analyze_table(
    runs_csv, out, baseline, tracking_uri, experiment, study_name,
    resamples, seed, detect_gain, margin,
) -> None:  # fmt: skip
    """The table path: a CSV, or a study's runs in MLflow named by hand (no study file: its
    looks, LR search and level are unknown here, so this is never the study's verdict, and
    nothing is logged to its parent run). ValueError: a user error."""
    # the analysis (pandas, scipy, mlflow) loads only when `scaling analyze` runs: `scaling
    # --help` and the other commands import this module and stay fast
    from analysis.api import run_analysis
    from analysis.judgement import TABLE, table_judgement
    from analysis.report.terminal import verdict_lines
    from analysis.tables.csv_times import load_csv_runs
    from analysis.tables.mlflow_io import load_curves, load_study_runs
    from analysis.tables.step_times import load_step_times

    if runs_csv is None and not experiment:
        raise ValueError("give STUDY (a study spec) or --runs-csv FILE")
    check_out(out)
    judgement = table_judgement(
        baseline or DEFAULT_BASELINE,
        margin_pct=margin,
        **given(seed=seed, num_resamples=resamples, detect_gain_pct=detect_gain),
        by=TABLE,
    )
    curves = times = None
    if runs_csv is not None:
        if experiment or study_name or tracking_uri:
            raise ValueError("give --runs-csv FILE or --experiment/--study-name, not both")
        table, times = load_csv_runs(runs_csv)  # times: its tokens_per_s column, if any
        out = out or Path("results") / runs_csv.stem / "analysis"
    else:
        if not (tracking_uri and experiment and study_name):
            raise ValueError("without STUDY give --tracking-uri, --experiment and --study-name")
        table, _parent = load_study_runs(tracking_uri, experiment, study_name)
        curves = lambda ids: load_curves(tracking_uri, ids)  # noqa: E731 (drawn runs only)
        times = lambda runs: load_step_times(tracking_uri, runs)  # noqa: E731
        out = out or Path("results") / study_name / "analysis"
    verdict = run_analysis(table, judgement, out, curves=curves, times=times)
    for line in verdict_lines(verdict):
        typer.echo(line)
    typer.echo(f"report: {out / 'report.html'}")


def given(**options) -> dict:
    """The options the user set (None: not given, the judgement's default stands)."""
    return {k: v for k, v in options.items() if v is not None}


def check_out(out: Path | None) -> None:
    """`--out` must be a folder (made if missing), not a file."""
    if out is not None and out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; give a folder for the report (made if missing)")
