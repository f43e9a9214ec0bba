"""`scaling run STUDY`: prepare data → submit → watch → analyze → report, in one command.

The same study file runs on a laptop (local executor, SQLite MLflow store) and on a cluster
(Slurm job arrays, an MLflow server): this module only strings together the round driver
(`scaling.driver.round_driver`) and `analysis`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis.tables.digests import MixedCode
from foundation import contract
from foundation.process.quiet import verbose
from scaling.backends.executors import executor_for
from scaling.driver.round_driver import StudyRun, View
from scaling.driver.submission import fail_parent_run, prepare_study_data, study_parent_run_id
from scaling.looks.sequential_seeds import judged_against
from scaling.spec.loader import resolve
from scaling.spec.next_size import grow_problem, study_grow
from scaling.spec.resolved import ResolvedStudy
from scaling.state.files.search_state import SearchState, read_state
from scaling.state.status import StatusRow, states_in_words, study_status
from scaling.study_judgement import study_judgement

if TYPE_CHECKING:
    from analysis.judgement import Judgement

__all__ = ["RunOutcome", "run_study", "interrupted_line", "analyze_study", "study_price"]


@dataclass
class RunOutcome:
    """What `run_study` produced: the grid's final state and where the analysis lies."""

    rows: list[StatusRow]
    verdict: dict | None
    report_dir: Path | None
    parent_run_id: str | None
    study: ResolvedStudy | None = None  # with the cells LR-search rounds added
    cancelled: bool = False  # `scaling cancel` stopped it: no analysis, the parent KILLED
    # why the analysis could not judge (e.g. no usable run of the baseline): `run` exits 3
    inconclusive: str | None = None


def run_study(
    study: ResolvedStudy,
    analyze: bool = True,
    out_dir: Path | None = None,
    baseline: str | None = None,
    say: Callable[[str], None] = print,
    view: View | None = None,
    retry_failed: bool = False,
) -> RunOutcome:
    """Run a whole study to its verdict; returns when every cell has ended and the report exists.

    Re-running is safe: finished cells are skipped (their state is in MLflow), failed ones
    retried, so an interrupted `scaling run` picks up where it stopped. A failed cell is
    resubmitted up to `study.retries` times, then left failed (`retry_failed`: once more, with
    its count reset). With `lr.search`, round after round until the search has ended
    (`scaling.driver.round_driver.StudyRun`). `view`: how a round's progress is shown (a terminal's
    live
    bar); else a plain line per change. `baseline` (`--baseline`) replaces the study's
    `verdict.baseline` for the whole run, looks and report alike (`looks.judged_against`).
    The study's parent run is RUNNING meanwhile, then FINISHED if every cell has a result,
    else FAILED (also on an exception; KILLED on Ctrl-C).
    """
    study = judged_against(study, baseline)  # before anything runs: refused, nothing started
    if study.spec.data.prepare is not None:
        say(f"data: {study.spec.dataset_path} (prepared now if missing)")
    prepare_study_data(study, progress=view is not None and verbose())  # a bar for large corpora
    driver = StudyRun(study, say=say, view=view)
    try:
        # also the round a crash interrupted; `retry_failed` resets the counts once
        rows = driver.drive(wait=True, retry_failed=retry_failed)
        driver.finish(rows, end_parent=False)  # the given-up runs, before the analysis reads them
        study = driver.study
        parent = study_parent_run_id(study)
        if driver.cancelled():  # stopped by `scaling cancel`, which ended the parent KILLED
            return RunOutcome(rows, None, None, parent, study, cancelled=True)
        verdict, report_dir, inconclusive = None, None, None
        if analyze:
            search = read_state(study.folder) if study.spec.lr.search is not None else None
            try:
                verdict, report_dir = analyze_study(study, out_dir, parent, search, say)
            except MixedCode:  # two versions of a variant's code: a refusal, not a word
                raise
            except ValueError as err:  # the runs cannot be judged (no usable baseline run)
                inconclusive = str(err).strip().splitlines()[0]
                say(f"analysis: inconclusive: {inconclusive}")
        # Last: the parent is RUNNING until its analysis is attached, like any run being written.
        driver.end_parent(rows)
    except BaseException as err:
        fail_parent_run(driver.study, err)
        raise
    return RunOutcome(rows, verdict, report_dir, parent, study, inconclusive=inconclusive)


# what an interrupt left, in this order; completed and not started said even at 0
INTERRUPTED_ORDER = (
    contract.COMPLETED,
    contract.DIVERGED,
    contract.FAILED,
    contract.CANCELLED,
    contract.RUNNING,
    contract.QUEUED,
    contract.PENDING,
)


def interrupted_line(study: ResolvedStudy) -> str:
    """What Ctrl-C left: "interrupted: 2 completed, 1 cancelled, 5 not started; run again to
    continue" (states with no cell left out, but for completed and not started). The cells
    are the study's as its state files have them now: the LR search and the looks add cells
    after start-up, and `study` is the grid `run` started with."""
    always = (contract.COMPLETED, contract.PENDING)
    try:
        states = [r.state for r in study_status(resolve(study.spec))]
    except Exception:  # noqa: BLE001 - MLflow unreachable: still one line
        return "interrupted; run again to continue"
    left = states_in_words(states, INTERRUPTED_ORDER, always, {contract.PENDING: "not started"})
    return f"interrupted: {left}; run again to continue"


def analyze_study(
    study: ResolvedStudy,
    out_dir: Path | None,
    parent: str | None,
    search: SearchState | None = None,
    say: Callable[[str], None] = print,
    judgement: Judgement | None = None,
    to_parent: bool = True,
    extra: dict | None = None,
) -> tuple[dict, Path]:
    """Load the study's runs from MLflow, judge them, and write the report (and, `to_parent`,
    log it to the parent run): how `scaling run` ends, and what `scaling analyze STUDY` does.

    `judgement`: None is the study's own (`study_judgement`, its inference figures measured now
    where they are not yet); `scaling analyze` passes its own (read, never measured; or a
    re-analysis). `search`: the LR search's final state; the report names the arms it left at an
    edge. `say`: progress lines (where the inference figures come from). `extra`: keys added to
    verdict.json (`--resolve`'s `resolve_path`). verdict.json's `resolve` prices its options in
    the study's device-hours (`study_price`).
    """
    # lazy: seconds of scipy and pandas, paid only by a run that analyses
    from analysis.api import run_analysis
    from analysis.tables.mlflow_io import load_curves, load_study_runs
    from analysis.tables.step_times import load_step_times

    # lazy: the inference measurement runs only when a study is analysed
    from scaling.inference_cost.inference_study import study_inference

    uri = study.mlflow.tracking_uri
    table, parent_id = load_study_runs(uri, study.mlflow.experiment, study.name)
    out = Path(out_dir) if out_dir else contract.analysis_folder(study.name, study.spec.output_dir)
    if judgement is None:
        measures_here = executor_for(study).measures_inference_here
        judgement = study_judgement(study, study_inference(study, say, measures_here), search)
    parent = (parent_id or parent) if to_parent else None
    verdict = run_analysis(
        table,
        judgement,
        out,
        curves=lambda ids: load_curves(uri, ids),  # read once the LRs are chosen: drawn runs only
        times=lambda runs: load_step_times(uri, runs),  # each run's logged step times
        parent=None if parent is None else (uri, parent),
        extra=extra,
        price=study_price(study),
    )
    return verdict, out


def study_price(study: ResolvedStudy) -> tuple[Callable[[str, float, float], float], str, Any]:
    """What verdict.json's `resolve` prices a run by: the plan's device-hours of one run
    (`scaling.costs.plan.plan_cost`, the pilot's where measured), their unit (GPU-hours or
    CPU-hours as the study's executor runs its cells) and the study's next size
    (`scaling.spec.next_size.study_grow`; None where the study cannot take one, so the report
    prices it as the study-file edit)."""
    from scaling.costs.plan import plan_cost  # lazy: models' accounting

    unit = f"{executor_for(study).device_name}-hours"
    grow = study_grow(study.spec) if grow_problem(study.spec) is None else None  # None: by hand
    return plan_cost(study), unit, grow
