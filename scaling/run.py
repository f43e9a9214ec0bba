"""`scaling run STUDY`: prepare data → submit → watch → analyze → report, in one command.

The same study file runs on a laptop (local executor, SQLite MLflow store) and on a cluster
(Slurm job arrays, an MLflow server): this module only strings together `scaling.submission`
and `analysis`, and shows progress while the cells train.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from foundation import contract as C
from foundation.quiet import verbose
from scaling.resolved import ResolvedStudy, resolve
from scaling.state import StatusRow, study_status
from scaling.study import Study

if TYPE_CHECKING:
    from scaling.refine import SearchState

__all__ = ["RunOutcome", "run_study", "Progress", "interrupted_line"]

POLL_S = 5.0
HEARTBEAT_S = 60.0
UPLOAD_WAIT_S = 600.0  # how long `scaling run` waits for MLflow to take leftover spools
STOP_WAIT_S = 120.0  # how long Ctrl-C waits for the local submit to cancel its cells


@dataclass
class RunOutcome:
    """What `run_study` produced: the grid's final state and where the analysis lies."""

    rows: list[StatusRow]
    verdict: dict | None
    report_dir: Path | None
    parent_run_id: str | None
    study: ResolvedStudy | None = None  # with the cells LR-search rounds added


class Progress:
    """Cells done / running / failed and an ETA, from the plan's FLOPs per cell.

    ETA = elapsed × (FLOPs of unfinished cells / FLOPs of cells ended since the start): cells
    differ in cost by orders of magnitude across a ladder, so counting cells would mislead.
    """

    def __init__(self, flops_by_cell: dict[str, float], already_done: set[str]) -> None:
        self.flops = flops_by_cell
        self.start = time.monotonic()
        self.done_before = already_done

    @staticmethod
    def ended(rows: list[StatusRow]) -> set[str]:
        """Cells that will not run again in this submission (completed, diverged, failed...)."""
        return {r.cell_id for r in rows if r.state in C.ENDED_STATES}

    def summary(self, rows: list[StatusRow]) -> str:
        states = Counter(r.state for r in rows)
        ended = self.ended(rows)
        elapsed = time.monotonic() - self.start
        failed = states[C.FAILED] + states[C.DIVERGED] + states[C.CANCELLED]
        return (
            f"{len(ended)}/{len(rows)} done ({states[C.COMPLETED]} completed, {failed} failed, "
            f"diverged or cancelled), {states[C.RUNNING]} running, {states[C.QUEUED]} queued; "
            f"elapsed {_clock(elapsed)}, ETA {self._eta(rows)}"
        )

    def brief(self, rows: list[StatusRow]) -> str:
        """The live bar's text: "2 completed, 2 running, 20 queued, 1 failed; ETA 0:04:10"
        (states with no cell left out, but for completed; the bar shows the rest)."""
        states = Counter(r.state for r in rows)
        parts = [f"{states[C.COMPLETED]} completed"]
        for state in (C.RUNNING, C.QUEUED, C.FAILED, C.DIVERGED, C.CANCELLED):
            if states[state]:
                parts.append(f"{states[state]} {state}")
        return f"{', '.join(parts)}; ETA {self._eta(rows)}"

    def _eta(self, rows: list[StatusRow]) -> str:
        ended = self.ended(rows)
        new_flops = sum(self.flops.get(c, 0.0) for c in ended - self.done_before)
        left_flops = sum(self.flops.get(r.cell_id, 0.0) for r in rows if r.cell_id not in ended)
        elapsed = time.monotonic() - self.start
        return "?" if new_flops <= 0 else _clock(elapsed * left_flops / new_flops)


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class _Reporter:
    """Says the progress line when a cell ends, and at least once a minute while cells run."""

    def __init__(self, progress: Progress, say: Callable[[str], None]) -> None:
        self.progress, self.say = progress, say
        self.last_ended: set[str] | None = None
        self.last_time = 0.0

    def __call__(self, rows: list[StatusRow]) -> None:
        ended = self.progress.ended(rows)
        if ended != self.last_ended or time.monotonic() - self.last_time > HEARTBEAT_S:
            self.say(self.progress.summary(rows))
            self.last_ended, self.last_time = ended, time.monotonic()


def upload_leftover_spools(
    study: ResolvedStudy,
    rows: list[StatusRow],
    say: Callable[[str], None],
    wait_s: float = UPLOAD_WAIT_S,
) -> list[StatusRow]:
    """Upload what cells that completed during a tracking outage left in their spools.

    A cell whose server stayed down past its own final upload attempt ends with a result on
    disk but a run MLflow still shows as unfinished (so `failed`); its spool holds the rest of
    its metrics and its end status. Retry until the server answers or `wait_s` passes.
    """
    from jobs import load_run_config
    from jobs.tracking import upload_spool

    done = [
        study.folder / "cells" / r.cell_id
        for r in rows
        if r.state == "failed" and (study.folder / "cells" / r.cell_id / "result.json").is_file()
    ]
    deadline = time.monotonic() + wait_s
    while done:
        out = done[0]
        config = load_run_config(out / "run_config.yaml")
        try:
            upload_spool(out, config.tracking, config.name)
            say(f"uploaded the spool {out.name} left during a tracking outage")
            done.pop(0)
        except Exception as err:  # noqa: BLE001 - still down: retry until the deadline
            if time.monotonic() > deadline:
                say(f"MLflow still unreachable ({err}); `scaling run` again uploads the rest")
                return rows
            time.sleep(POLL_S)
    try:
        return study_status(study)
    except Exception:  # noqa: BLE001 - a flapping server: keep the rows we have
        return rows


def run_study(
    study: ResolvedStudy | Study,
    analyze: bool = True,
    out_dir: Path | None = None,
    baseline: str = "linear",
    say: Callable[[str], None] = print,
    live: bool = False,
    retry_failed: bool = False,
) -> RunOutcome:
    """Run a whole study to its verdict; returns when every cell has ended and the report exists.

    Re-running is safe: finished cells are skipped (their state is in MLflow), failed ones
    retried, so an interrupted `scaling run` picks up where it stopped. A failed cell is
    resubmitted up to `study.retries` times, then left failed (`retry_failed`: once more, with
    its count reset).
    The study's parent run is RUNNING meanwhile, then FINISHED if every cell has a result,
    else FAILED (also on an exception; KILLED on Ctrl-C).
    """
    from scaling.submission import fail_parent_run, prepare_data

    spec = study.spec if isinstance(study, ResolvedStudy) else study
    if spec.data.prepare is not None:
        say(f"data: {spec.dataset_path} (prepared now if missing)")
    prepare_data(study, progress=live and verbose())  # a bar only worth it on large corpora
    study = resolve(study)
    try:
        return _run_resolved(study, analyze, out_dir, baseline, say, live, retry_failed)
    except BaseException as err:
        fail_parent_run(study, err)
        raise


def _run_resolved(
    study: ResolvedStudy,
    analyze: bool,
    out_dir: Path | None,
    baseline: str,
    say: Callable[[str], None],
    live: bool,
    retry_failed: bool = False,
) -> RunOutcome:
    """`run_study` once the data exists; the parent run ends with what this returns.

    With `lr.search` each round is submitted and waited for, then the next one written
    (`scaling.refine.advance`), until the search has ended; then the analysis.
    """
    from scaling.mlflow_state import end_parent_run, parent_status
    from scaling.refine import advance, read_state, search_over
    from scaling.submission import end_given_up_runs, study_parent_run_id

    while True:
        # also the round a crash interrupted; `retry_failed` resets the counts once
        rows = _run_round(study, say, live, retry_failed)
        retry_failed = False
        following = advance(study, rows, say)  # a round with only given-up cells is judged
        if following is not None:
            study = following
        elif any(r.retryable for r in rows):
            say(f"retrying the failed cells (study.retries: {study.spec.retries})")
        elif search_over(study):
            break
        else:  # cancelled cells hold the round: judge it with them
            following = advance(study, rows, say, allow_failed=True)
            if following is None:
                break
            study = following

    end_given_up_runs(study, rows)  # before the analysis reads them
    parent = study_parent_run_id(study)
    verdict, report_dir = None, None
    if analyze:
        search = read_state(study.folder) if study.spec.lr.search is not None else None
        verdict, report_dir = analyze_study(study, out_dir, baseline, parent, search)
    # Last: the parent is RUNNING until its analysis is attached, like any run being written.
    end_parent_run(study, parent_status([r.state for r in rows]))
    return RunOutcome(rows, verdict, report_dir, parent, study)


def _run_round(
    study: ResolvedStudy, say: Callable[[str], None], live: bool, retry_failed: bool = False
) -> list[StatusRow]:
    """Submit the study's unfinished cells and wait until none is queued or running."""
    from scaling.plan import plan_study
    from scaling.submission import submit_study, wait_study

    plan = plan_study(study)
    before = {r.cell_id for r in study_status(study) if r.state in C.DONE_STATES}
    progress = Progress({r.cell_id: r.flops for r in plan.rows}, before)
    say(f"study {study.name}: {plan.num_runs} cells, {len(before)} already done")

    errors: list[BaseException] = []
    stop = threading.Event()  # Ctrl-C here: the submitting thread cancels what it started
    if study.executor == "local":
        # The local executor runs cells while submit_study blocks; watch from this thread.
        def submit() -> None:
            try:
                submit_study(study, end_parent=False, retry_failed=retry_failed, stop=stop)
            except BaseException as err:  # noqa: BLE001 - re-raised below in this thread
                errors.append(err)

        submitting = threading.Thread(target=submit, name="scaling-submit", daemon=True)
        submitting.start()
    else:
        submitted = submit_study(study, end_parent=False, retry_failed=retry_failed)
        say(f"submitted {len(submitted.submitted)} cell(s) to Slurm")
        submitting = None
    busy = submitting.is_alive if submitting is not None else None

    def unavailable(err: Exception) -> None:
        say(f"status unavailable ({type(err).__name__}: {str(err)[:200]}); retrying")

    if live:  # a terminal: one bar redrawn in place
        from scaling.live import LiveProgress

        display = LiveProgress(progress, len(study.cells))
    else:  # piped or CI: a plain line per change
        display = None
    try:
        with display or contextlib.nullcontext():
            rows = wait_study(
                study,
                callback=display or _Reporter(progress, say),
                poll_s=POLL_S,
                busy=busy,
                on_error=unavailable,
            )
    except KeyboardInterrupt:
        if submitting is not None:
            stop.set()
            submitting.join(timeout=STOP_WAIT_S)
        raise
    if errors:
        raise errors[0]
    return upload_leftover_spools(study, rows, say)


def interrupted_line(study: ResolvedStudy | Study) -> str:
    """What Ctrl-C left: "interrupted: 2 completed, 1 cancelled, 5 not started; run again to
    continue" (states with no cell left out, but for completed and not started)."""
    try:
        states = Counter(r.state for r in study_status(study))
    except Exception:  # noqa: BLE001 - MLflow unreachable: still one line
        return "interrupted; run again to continue"
    parts = [f"{states[C.COMPLETED]} completed"]
    for state in (C.DIVERGED, C.FAILED, C.CANCELLED, C.RUNNING, C.QUEUED):
        if states[state]:
            parts.append(f"{states[state]} {state}")
    parts.append(f"{states[C.PENDING]} not started")
    return f"interrupted: {', '.join(parts)}; run again to continue"


def analyze_study(
    study: ResolvedStudy,
    out_dir: Path | None,
    baseline: str,
    parent: str | None,
    search: SearchState | None = None,
) -> tuple[dict, Path]:
    """Load the study's runs from MLflow, fit, judge, and write the report (also to MLflow).

    `search`: the LR search's final state; the report names the arms it left at an edge.
    """
    from analysis.api import run_analysis
    from analysis.tables.mlflow_io import load_curves, load_study_runs

    uri = study.mlflow.tracking_uri
    table, parent_id = load_study_runs(uri, study.mlflow.experiment, study.name)
    out = Path(out_dir) if out_dir else C.analysis_folder(study.name, study.spec.output_dir)
    verdict = run_analysis(
        table,
        out,
        baseline=baseline,
        margin_pct=study.spec.verdict.margin_pct,
        parent_run_id=parent_id or parent,
        tracking_uri=uri,
        curves=lambda ids: load_curves(uri, ids),  # read once the LRs are chosen: drawn runs only
        lr_search=None if search is None else _search_summary(search),
    )
    return verdict, out


def _search_summary(search: SearchState) -> dict:
    """What the report says about the LR search (rounds, cells added, arms left at an edge)."""
    return {
        "rounds": search.round,
        "num_added_cells": sum(len(a.seeds) for a in search.added),
        "ended": search.ended,
        "open_arms": list(search.open_arms),
        "stopped_arms": list(search.stopped_arms),
    }
