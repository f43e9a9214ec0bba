"""`scaling analyze`: fits, bootstrap CIs and a verdict for a study (MLflow) or a run CSV.

User errors (a bad CSV, an unknown baseline, a spec without `mlflow`) end in one line on stderr
naming the file, column and row or the key to fix, exit status 2, no traceback.
"""

from __future__ import annotations

from pathlib import Path

import typer

from analysis.tables.spec import (
    DEFAULT_BASELINE,
    spec_login,
    spec_margin,
    spec_verdict,
    study_source,
)
from foundation import contract


def analyze(
    study: Path | None = typer.Argument(None, help="study spec (YAML); runs are read from MLflow"),
    runs_csv: Path | None = typer.Option(None, "--runs-csv", help="analyse this run table"),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="output dir [default: STUDY's folder/analysis, as `scaling run`; "
        "results/<csv name>/analysis for --runs-csv]",
    ),
    baseline: str | None = typer.Option(
        None,
        "--baseline",
        help="the arm the others are judged by; A,B = per size the stronger of arms A and B "
        "[default: the spec's verdict.baseline, else linear]",
    ),
    tracking_uri: str | None = typer.Option(None, "--tracking-uri", help="overrides the spec's"),
    experiment: str | None = typer.Option(None, "--experiment", help="overrides the spec's"),
    study_name: str | None = typer.Option(None, "--study-name", help="overrides the spec's name"),
    resamples: int = typer.Option(1000, "--resamples", help="parametric bootstrap draws"),
    seed: int = typer.Option(0, "--seed", help="bootstrap RNG seed"),
    detect_gain: float = typer.Option(0.5, "--detect-gain", help="gain (%) for the power table"),
    margin: float | None = typer.Option(
        None,
        "--margin",
        help="equivalence margin (% of the loss): `none` needs the top-size interval within "
        "+-margin [default: the spec's verdict.margin_pct, else 0.5]",
    ),
    log_to_parent: bool = typer.Option(True, help="log the report to the study's parent run"),
) -> None:
    """Fit scaling laws per variant and judge whether each variant's gain persists with scale."""
    if study is not None and runs_csv is not None:
        raise typer.BadParameter("give STUDY (a study spec) or --runs-csv FILE, not both")
    if study is None and runs_csv is None and not experiment:
        raise typer.BadParameter("give STUDY (a study spec) or --runs-csv FILE")
    try:
        _analyze(
            study, runs_csv, out, baseline, tracking_uri, experiment, study_name,
            resamples, seed, detect_gain, log_to_parent, margin,
        )  # fmt: skip
    except ValueError as err:  # a user error: one line naming what to fix, no traceback
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None


def _analyze(
    study, runs_csv, out, baseline, tracking_uri, experiment, study_name,
    resamples, seed, detect_gain, log_to_parent, margin=None,
) -> None:  # fmt: skip
    # the analysis (pandas, scipy, mlflow) loads only when `scaling analyze` runs: `scaling
    # --help` and the other commands import this module and stay fast
    from analysis.api import run_analysis
    from analysis.report.terminal import verdict_lines
    from analysis.tables.inference_io import read_inference
    from analysis.tables.mlflow_io import load_curves, load_study_runs
    from analysis.tables.runs import load_csv

    parent, curves, inference = None, None, None
    if margin is None and study is not None:
        margin = spec_margin(study)
    spec_baseline, alpha = spec_verdict(study) if study is not None else (None, None)
    baseline = baseline or spec_baseline or DEFAULT_BASELINE
    if runs_csv is not None:
        table = load_csv(runs_csv)
        out = out or Path("results") / runs_csv.stem / "analysis"
    else:
        uri, exp, name = (tracking_uri, experiment, study_name)
        folder = None
        if study is not None:
            spec_uri, spec_exp, spec_name, folder = study_source(study)
            login = spec_login(study)
            if login is not None:
                login.export()  # as `scaling run` does: MLflow's client reads it from there
            uri, exp, name = uri or spec_uri, exp or spec_exp, name or spec_name
            typer.echo(f"study folder: {folder.parent}")
            inference = read_inference(folder.parent)  # pilot.json / inference.json, if measured
        if not (uri and exp and name):
            raise typer.BadParameter(
                "without STUDY give --tracking-uri, --experiment, --study-name"
            )
        table, parent = load_study_runs(uri, exp, name)
        curves = lambda ids, uri=uri: load_curves(uri, ids)  # noqa: E731 (drawn runs only)
        tracking_uri = uri
        out = out or folder or contract.analysis_folder(name)
    verdict = run_analysis(
        table,
        out,
        baseline=baseline,
        parent_run_id=parent if log_to_parent else None,
        tracking_uri=tracking_uri,
        num_resamples=resamples,
        seed=seed,
        detect_gain_pct=detect_gain,
        curves=curves,
        margin_pct=0.5 if margin is None else margin,
        **({} if alpha is None else {"alpha": alpha}),  # the spec's verdict.alpha
        inference=inference,
    )
    for line in verdict_lines(verdict):
        typer.echo(line)
    typer.echo(f"report: {out / 'report.html'}")
