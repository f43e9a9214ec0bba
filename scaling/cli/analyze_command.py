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
table is judged by `analysis.cli.analyze_table`: one command, two sources. The study's own
analysis is `scaling.driver.run.analyze_study`, the function `scaling run` ends with.
"""

from __future__ import annotations

from pathlib import Path

import typer

from analysis.cli import DETECT_HELP, RESAMPLES_HELP, analyze_table, check_out, given
from analysis.tables.spec import DEFAULT_MARGIN_PCT

REANALYSIS_LINE = "re-analysis by the user ({}), not the study's verdict"


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
        _fail(str(err))


def _fail(message: str) -> None:
    from foundation.secrets import mask_userinfo  # a message may quote a URI

    typer.echo(f"error: {mask_userinfo(message)}", err=True)
    raise typer.Exit(2)


def _analyze_study(
    path: Path, out: Path | None, baseline: str | None, margin: float | None, options: dict
) -> None:
    # lazy: `scaling --help` stays fast; the analysis loads only when it runs
    from analysis.report.terminal import verdict_lines
    from analysis.tables.inference_io import read_inference
    from foundation import contract
    from scaling.cli.commands import _load
    from scaling.driver.run import analyze_study
    from scaling.looks.sequential_seeds import judged_against
    from scaling.state.mlflow_state import cell_runs, client_for
    from scaling.state.stale import stop_if_stale
    from scaling.study_judgement import study_judgement

    spec = _load(path, check_environment=False, announce=False)  # the loader `run` uses
    _check_store(spec)
    original = spec.spec.verdict.baseline
    spec = judged_against(spec, baseline)  # not an arm, or not the looks' baseline: refused
    own = study_judgement(spec, read_inference(spec.folder))  # read, never measured here
    if spec.spec.seed_rounds is not None and not own.sequential:
        raise ValueError(
            f"study {spec.name}: no sequential look judged yet, and a sequential study is judged "
            "at its last look's level; `scaling run` judges look 1 once the first "
            f"{spec.spec.seed_rounds.start} seeds have finished"
        )
    changed = _changes(own, margin, options)
    if baseline is not None and baseline != original:
        changed.insert(0, f"--baseline {baseline}")
    judgement = own
    if changed:
        fixed_by_looks = [c for c in changed if c.split()[0] in ("--margin", "--seed")]
        if own.sequential and fixed_by_looks:
            raise ValueError(
                f"{' and '.join(fixed_by_looks)}: a "
                "sequential study is judged at its last look's level, with its design's margin "
                f"({own.margin_pct:g}%) and a bootstrap seeded from its runs; drop them"
            )
        if out is None:
            raise ValueError(
                f"{', '.join(changed)}: not the study's own judgement, so not written into its "
                "report folder; give --out DIR for this re-analysis"
            )
        judgement = own.reanalysed(tuple(changed), margin_pct=margin, **options)  # baseline:
        # `judged_against`'s
    report_dir = contract.analysis_folder(spec.name, spec.spec.output_dir)
    target = out or report_dir
    if changed and target.resolve() == report_dir.resolve():
        raise ValueError(f"--out {out} is the study's own report folder; give another folder")
    # stale runs are judged never (as `run`); a refused login is MLflow's exception, one line
    # (`scaling.cli._analyze`)
    stop_if_stale(spec, cell_runs(spec, client_for(spec)), analyzing=True)
    if changed:
        typer.echo(REANALYSIS_LINE.format(", ".join(changed)))
    # the study's own verdict, into its own folder: the parent run gets it, as from `run`
    verdict, _ = analyze_study(
        spec, target, None, judgement=judgement, to_parent=out is None and not changed
    )
    for line in verdict_lines(verdict):
        typer.echo(line)
    if changed:
        typer.echo(REANALYSIS_LINE.format(", ".join(changed)))
    typer.echo(f"report: {target / 'report.html'}")


def _changes(own, margin: float | None, options: dict) -> list[str]:
    """The options the user set to something other than the study's own judgement's: each makes
    the analysis a re-analysis (``--margin 0.3``)."""
    mine = {
        "--margin": (margin, own.margin_pct),
        "--seed": (options.get("seed"), own.seed),
        "--resamples": (options.get("num_resamples"), own.num_resamples),
        "--detect-gain": (options.get("detect_gain_pct"), own.detect_gain_pct),
    }
    return [f"{flag} {v}" for flag, (v, own_v) in mine.items() if v is not None and v != own_v]


def _check_store(spec) -> None:
    """One line and exit 2 if the study's SQLite store is gone or broken
    (`scaling.state.store_check`), or not there yet (nothing submitted: opening it would create
    an empty one); the study folder is said once the store is not broken, as `status` says it."""
    from foundation.studypaths import missing_store, missing_store_message  # lazy: as above
    from scaling.state.store_check import store_trouble  # lazy: `scaling --help` stays fast

    trouble = store_trouble(spec.mlflow.tracking_uri, spec.mlflow.experiment, spec.folder)
    if trouble is not None:
        raise ValueError(str(trouble))
    typer.echo(f"study folder: {spec.folder}")
    store = missing_store(spec.mlflow.tracking_uri)
    if store is not None:
        raise ValueError(missing_store_message(store))
