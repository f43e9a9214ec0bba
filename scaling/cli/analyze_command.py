"""`scaling analyze STUDY`: the study judged exactly as `scaling run` judges it, or refused.

The study is resolved by the loader `run` uses and judged by its own judgement
(`scaling.study_judgement.study_judgement`: its baseline, margin, level, sequential design and
looks, LR-search and stability state, bootstrap seed), so on the same runs the verdict.json is
`run`'s byte for byte. That, and only that, is written into the study's report folder and
logged to its parent run.

A user's own re-analysis (another `--margin`, `--seed`, `--resamples` or `--detect-gain`) is not
the study's verdict: it must go to `--out`, is labelled so in the terminal, report.md/html and
verdict.json (``reanalysis``), and never touches the study's folder or parent run. Refused, one
`error:` line and exit 2, before anything is written: a `--baseline` that is not an arm or that
contradicts the looks (`scaling.looks.sequential_seeds.judged_against`, as `run`), a sequential
study with
no look judged yet, finished runs of code that has changed since (`scaling status`: stale; as
`run`), `--out` naming a file. Without STUDY (`--runs-csv FILE`, or the runs named by hand) the
table is judged by `analysis.cli.analyze_table`: one command, two sources. The one verb is
`scaling.study.Study.analyze`, through `scaling.driver.run.analyze_study`, the function
`scaling run` ends with.
"""

from __future__ import annotations

from pathlib import Path

import typer

from analysis.cli import DETECT_HELP, RESAMPLES_HELP, analyze_table, check_out, given
from analysis.tables.spec import DEFAULT_MARGIN_PCT
from scaling.cli.terminal import fail, load


def analyze(
    study: Path | None = typer.Argument(
        None, help="study spec (YAML): judged as `scaling run` judges it, runs read from MLflow"
    ),
    runs_csv: Path | None = typer.Option(None, "--runs-csv", help="analyse this run table"),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="output dir [default: STUDY's report folder, as `scaling run`; "
        "results/<csv name>/analysis for --runs-csv]; required for a re-analysis",
    ),
    baseline: str | None = typer.Option(
        None,
        "--baseline",
        help="the arm the others are judged by; A,B = per size the stronger of arms A and B "
        "[default: the study's verdict.baseline, else linear]; refused if the looks read another",
    ),
    tracking_uri: str | None = typer.Option(None, "--tracking-uri", help="without STUDY"),
    experiment: str | None = typer.Option(None, "--experiment", help="without STUDY"),
    study_name: str | None = typer.Option(None, "--study-name", help="without STUDY"),
    resamples: int | None = typer.Option(None, "--resamples", help=RESAMPLES_HELP),
    seed: int | None = typer.Option(None, "--seed", help="bootstrap RNG seed [default: 0]"),
    detect_gain: float | None = typer.Option(None, "--detect-gain", help=DETECT_HELP),
    margin: float | None = typer.Option(
        None,
        "--margin",
        help="equivalence margin (% of the loss): `none` needs the top-size interval within "
        f"+-margin [default: the study's verdict.margin_pct, else {DEFAULT_MARGIN_PCT:g}]; "
        "another one is a "
        "re-analysis (needs --out)",
    ),
) -> None:
    """Fit scaling laws per variant and judge whether each variant's gain persists with scale."""
    try:
        if study is None:  # a run table: never the study's verdict (`analysis.cli`)
            analyze_table(
                runs_csv, out, baseline, tracking_uri, experiment, study_name,
                resamples, seed, detect_gain, margin,
            )  # fmt: skip
            return
        if runs_csv is not None:
            raise ValueError("give STUDY (a study spec) or --runs-csv FILE, not both")
        for flag, value in (("--tracking-uri", tracking_uri), ("--experiment", experiment),
                            ("--study-name", study_name)):  # fmt: skip
            if value is not None:
                raise ValueError(
                    f"{flag}: STUDY names its runs (its `mlflow` section); drop {flag}, or "
                    "name the runs without STUDY (then it is not the study's verdict)"
                )
        check_out(out)
        options = given(seed=seed, num_resamples=resamples, detect_gain_pct=detect_gain)
        _analyze_study(study, out, baseline, margin, options)
    except ValueError as err:  # a user error: one line naming what to fix, no traceback
        fail(str(err))


def _analyze_study(
    path: Path, out: Path | None, baseline: str | None, margin: float | None, options: dict
) -> None:
    """The study's own verdict, or the user's re-analysis of it (`Study.analyze`), printed."""
    from analysis.report.terminal import verdict_lines  # lazy: pandas, once there is one
    from scaling.study import REANALYSIS_LINE  # lazy: `scaling --help` stays fast

    study = load(path, check_environment=False, announce=False)  # the loader `run` uses
    analysis = study.analyze(out, baseline, margin, options)
    for line in verdict_lines(analysis.verdict):
        typer.echo(line)
    if analysis.changed:
        typer.echo(REANALYSIS_LINE.format(", ".join(analysis.changed)))
    typer.echo(f"report: {analysis.report_dir / 'report.html'}")
