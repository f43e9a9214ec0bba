"""The table path of `scaling analyze` (one command, `scaling.cli.analyze_command`): a run table
(`--runs-csv FILE`, or `--tracking-uri --experiment --study-name`) judged by the user's
settings, written to `--out`; never a study's verdict.

`scaling analyze STUDY` judges a study by its own judgement
(`scaling.study_judgement.study_judgement`), which analysis cannot build (it imports nothing from
scaling); both paths end in `analysis.api.run_analysis`. A user error (a bad CSV, an unknown
baseline) is a ValueError naming the file, column and row or the option to fix, which the
command prints as one line, exit status 2.
"""

from __future__ import annotations

from pathlib import Path

import typer

from analysis.tables.judgement import DEFAULT_DETECT_GAIN_PCT, DEFAULT_RESAMPLES
from analysis.tables.spec import DEFAULT_BASELINE

RESAMPLES_HELP = f"parametric bootstrap draws [default: {DEFAULT_RESAMPLES}]"
DETECT_HELP = f"gain (%) for the power table [default: {DEFAULT_DETECT_GAIN_PCT}]"


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
