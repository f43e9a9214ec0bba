"""`Study`: one object owns a study's life, as OLMo-core's `ModelLadder` owns its ladder.

Made once from the study file (`Study.load`): the spec read, validated and resolved into its
cells (`scaling.spec.loader`), checked against where it runs (`scaling.driver.environment`);
its executor and its MLflow client are built when a verb first needs them. Each verb hands the
resolved study to the room that does the work and returns what it produced, as data:

    study = Study.load("studies/demo.yaml")
    study.plan()       # Plan: cells, FLOPs, device-hours (scaling.costs.plan)
    study.status()     # list[StatusRow]: each cell's state (scaling.state.status)
    study.run()        # RunOutcome: data, rounds, verdict (scaling.driver.run)

The `scaling` commands are thin calls on these verbs (`scaling.cli`): they parse flags, call
one verb and print. Lines meant for a person (progress, what was adopted) go to `say`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from foundation import contract
from foundation.config import ConfigError
from scaling.backends.executors import Executor, executor_for
from scaling.costs.build_check import check_arms_build
from scaling.costs.plan import Plan, plan_study
from scaling.driver.environment import check_study_environment, load_study_spec
from scaling.driver.round_driver import Cancelled, StudyRun
from scaling.driver.run import RunOutcome, analyze_study, run_study
from scaling.driver.submission import Submitted
from scaling.driver.watcher import Rows, View
from scaling.looks.sequential_seeds import judged_against
from scaling.spec.loader import resolve
from scaling.spec.places import check_places
from scaling.spec.resolved import ResolvedStudy
from scaling.state.mlflow_state import cell_runs, client_for
from scaling.state.stale import StaleChoice, settle_from_flags, stop_if_stale
from scaling.state.status import StatusRow, study_status
from scaling.state.store_check import adopt_new_store, store_trouble

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from analysis.judgement import Judgement

__all__ = ["Study", "Submitted", "Cancelled", "Watched", "Analysis", "Report"]

Say = Callable[[str], None]


@dataclass(frozen=True)
class Watched:
    """What `Study.watch` saw: the rows the last round ended with, and whether `scaling cancel`
    stopped the study meanwhile."""

    rows: Rows
    cancelled: bool


@dataclass(frozen=True)
class Analysis:
    """What `Study.analyze` wrote: the verdict, the folder of the report, and the options that
    made it a user's re-analysis rather than the study's own verdict (empty: the study's own)."""

    verdict: dict
    report_dir: Path
    changed: tuple[str, ...] = ()


@dataclass(frozen=True)
class Report:
    """The study's report as it lies in its report folder (`Study.report`): the verdict is None
    until the study has been analysed."""

    folder: Path
    verdict: dict | None

    @property
    def html(self) -> Path:
        return self.folder / "report.html"

    @property
    def markdown(self) -> Path:
        return self.folder / "report.md"


class Study:
    """A resolved study and its verbs: `plan`, `pilot`, `run`, `resolve`, `submit`, `wait`,
    `watch`, `status`, `cancel`, `analyze`, `report`.

    `resolved` grows as the LR search and the looks add rounds (`run`, `submit` and `watch` keep
    the grown one). `say` gets every line meant for a person.
    """

    def __init__(self, resolved: ResolvedStudy, say: Say = lambda _msg: None) -> None:
        self.resolved = resolved
        self.say = say

    @classmethod
    def load(
        cls,
        path: str | Path,
        check_environment: bool = True,
        writes: bool = False,
        new_store: bool = False,
        drop_variants: tuple[str, ...] = (),
        say: Say = lambda _msg: None,
    ) -> Study:
        """The study at `path`, read, validated and resolved once; raises ConfigError naming the
        field and the fix. `check_environment`: its MLflow store and its executor's cluster
        answer (`scaling.driver.environment`). `writes`: the verb will make folders and a store,
        so they must be writable by this user first (a read-only `status` of someone else's
        study need not be). `new_store`: a lost or broken SQLite store is replaced first
        (`scaling.state.store_check.adopt_new_store`), then the environment checked.
        """
        resolved = load_study_spec(
            path, check_environment=check_environment and not new_store, drop_variants=drop_variants
        )
        if new_store:
            adopt_new_store(resolved, say)
            try:
                check_study_environment(resolved)
            except ConfigError as err:
                raise err.prefixed(str(path)) from None
        if writes:
            try:
                check_places(resolved.spec)
            except ConfigError as err:
                raise err.prefixed(str(path)) from None
        return cls(resolved, say)

    # what the study is

    @property
    def name(self) -> str:
        return self.resolved.name

    @property
    def folder(self) -> Path:
        return self.resolved.folder

    @cached_property
    def executor(self) -> Executor:
        """Where its cells run (`scaling.backends.executors.executor_for`), built once."""
        return executor_for(self.resolved)

    @cached_property
    def client(self) -> MlflowClient:
        """Its MLflow store's client, made once."""
        return client_for(self.resolved)

    def judged_against(self, baseline: str | None) -> Study:
        """This study with `baseline` as its `verdict.baseline` for every look and the report
        (`scaling.looks.sequential_seeds.judged_against`: ValueError for an arm it does not
        have, or one the looks were not judged against). None: its own `verdict.baseline`,
        still checked against the looks."""
        return Study(judged_against(self.resolved, baseline), self.say)

    # before anything trains

    def check_builds(self, remember: bool = False) -> list[str]:
        """Each arm of the user's own built once, tiny (`scaling.costs.build_check`); one line
        an arm checked. ValueError for the first that does not build."""
        return check_arms_build(self.resolved, remember=remember)

    def settle_stale(self, rerun: bool, accept: bool) -> None:
        """Finished cells whose model code changed: rerun or accept them as told, else
        ValueError (`scaling.state.stale.settle_from_flags`)."""
        settle_from_flags(self.resolved, rerun, accept, say=self.say)

    def plan(self) -> Plan:
        """Every cell's size and cost, and the totals (`scaling.costs.plan.plan_study`)."""
        return plan_study(self.resolved)

    def pilot(self, warmup: int = 5, steps: int = 30, memory_limit_bytes: int | None = None):
        """One short job per distinct (size, variant, layout), timed; kept in `pilot.json`
        (`scaling.costs.pilot.run_pilot`)."""
        from scaling.costs.pilot import run_pilot  # lazy: the probes' job machinery

        return run_pilot(self.resolved, warmup, steps, self.say, memory_limit_bytes)

    # its rounds

    def run(
        self,
        analyze: bool = True,
        out_dir: Path | None = None,
        view: View | None = None,
        retry_failed: bool = False,
    ) -> RunOutcome:
        """Data, rounds, verdict and report in one call (`scaling.driver.run.run_study`)."""
        outcome = run_study(
            self.resolved,
            analyze=analyze,
            out_dir=out_dir,
            say=self.say,
            view=view,
            retry_failed=retry_failed,
        )
        if outcome.study is not None:
            self.resolved = outcome.study
        return outcome

    def resolve(self, budget: float | None = None, max_looks: int | None = None, kinds=None,
                view=None, check_only: bool = False):  # fmt: skip
        """`scaling run --resolve`: the resolve loop bought with the study's own cells, within
        `budget` device-hours (None: the study file's `resolve:`; `scaling.driver.resolve`);
        ResolveRefused (nothing written) before anything starts. `check_only`: the declared
        plan, refused or not, and no more."""
        from scaling.driver.resolve import check_resolve, resolve_study  # lazy: the analysis

        plan = check_resolve(self.resolved, budget, max_looks, kinds)
        if check_only:
            return plan
        outcome = resolve_study(self.resolved, plan, self.say, view)
        self.resolved = outcome.study
        return outcome

    def submit(
        self,
        retry_failed: bool = False,
        rounds: bool = True,
        end_parent: bool = True,
        stale: StaleChoice = None,
        stop: threading.Event | None = None,
    ) -> Submitted:
        """Submit what is due; a study `scaling cancel` stopped goes on.

        `rounds` (`scaling submit`): round after round without waiting (`StudyRun.drive`): on
        Slurm it returns once a round is queued, with the local executor once the study is
        over. Else one submission of the due cells (`StudyRun.submit`: `stale` and `stop` are
        its); with an executor that runs the cells itself, the study's end then ends its parent
        run (`end_parent`). Afterwards `resolved` has the cells the LR search added meanwhile.
        """
        run = StudyRun(self.resolved, self.executor, say=self.say)
        if not rounds:
            run.resume_cancelled()
            result = run.submit(retry_failed, stale, stop)
            if run.executor.runs_cells_in_submit:
                run.finish(run.status(), end_parent=end_parent)
            return result
        rows = run.drive(wait=False, retry_failed=retry_failed)
        run.finish(rows, end_parent=end_parent)
        assert run.last is not None, "drive() submits at least once"
        last = run.last
        result = Submitted(last.parent_run_id, run.submitted, last.skipped, last.jobs)
        self.resolved = resolve(self.resolved.spec)  # with the rounds the LR search added
        return result

    def wait(
        self,
        callback: Callable[[Rows], None] | None = None,
        poll_s: float = 10.0,
        timeout_s: float | None = None,
        busy: Callable[[], bool] | None = None,
        on_error: Callable[[Exception], None] | None = None,
    ) -> Rows:
        """Poll until no cell is queued or running (`scaling.driver.watcher.RoundWatcher.wait`);
        the last rows. Submits nothing."""
        run = StudyRun(self.resolved, self.executor, poll_s=poll_s)
        return run.watcher.wait(callback, timeout_s, busy, on_error)

    def watch(self, view: View | None = None, poll_s: float | None = None) -> Watched:
        """`scaling status --watch`: what is queued waited for, each round that ends judged and
        the LR search's next one submitted, until the study is over or cancelled."""
        run = StudyRun(self.resolved, self.executor, say=self.say, view=view, poll_s=poll_s)
        rows = run.drive(submit_first=False)
        run.finish(rows)
        self.resolved = run.study
        return Watched(rows, run.cancelled() is not None)

    def status(self, refresh: bool = False) -> list[StatusRow]:
        """Each cell's state, from MLflow and the scheduler (`scaling.state.status`); `refresh`:
        every run searched again, not the cache of finished runs."""
        return study_status(self.resolved, refresh=refresh)

    def cancel(self) -> Cancelled:
        """Stop the study: its live jobs cancelled, their runs and the parent KILLED, the study
        marked cancelled (`StudyRun.cancel`); a study that has ended is left as it is."""
        return StudyRun(self.resolved, self.executor).cancel()

    # its verdict

    def analyze(
        self,
        out: Path | None = None,
        baseline: str | None = None,
        margin: float | None = None,
        options: dict[str, Any] | None = None,
    ) -> Analysis:
        """`scaling analyze STUDY`: the study judged as `run` judges it (its own judgement:
        `scaling.study_judgement`), written to its report folder and its parent run; or, with
        options of the user's that differ from its own, a re-analysis that must go to `out`.
        ValueError (one line naming what to fix) before anything is written: a store gone,
        broken or not made yet, a baseline the looks contradict, a sequential study with no
        look yet, a re-analysis without `out` or into the study's folder, stale runs."""
        # lazy: pandas and scipy load only when a study is judged
        from analysis.tables.inference_io import read_inference
        from scaling.driver.resolve import after_path  # lazy: as above
        from scaling.study_judgement import study_judgement  # lazy: as above

        self._check_store()
        original = self.resolved.spec.verdict.baseline
        spec = judged_against(self.resolved, baseline)  # not an arm, or not the looks': refused
        own = study_judgement(spec, read_inference(spec.folder))  # read, never measured here
        if spec.spec.seed_rounds is not None and not own.sequential:
            raise ValueError(
                f"study {spec.name}: no sequential look judged yet, and a sequential study is "
                "judged at its last look's level; `scaling run` judges look 1 once the first "
                f"{spec.spec.seed_rounds.start} seeds have finished"
            )
        options = options or {}
        changed = _changes(own, margin, options)
        if baseline is not None and baseline != original:
            changed.insert(0, f"--baseline {baseline}")
        judgement, extra = after_path(spec, own)  # a resolve's: its last look's level, its path
        if changed:
            judgement = _reanalysis(own, changed, out, margin, options)
        report_dir = contract.analysis_folder(spec.name, spec.spec.output_dir)
        target = out or report_dir
        if changed and target.resolve() == report_dir.resolve():
            raise ValueError(f"--out {out} is the study's own report folder; give another folder")
        # stale runs are judged never (as `run`)
        stop_if_stale(spec, cell_runs(spec, self.client), analyzing=True)
        if changed:
            self.say(REANALYSIS_LINE.format(", ".join(changed)))
        # the study's own verdict, into its own folder: the parent run gets it, as from `run`
        verdict, _ = analyze_study(spec, target, None, judgement=judgement,
                                   to_parent=out is None and not changed,
                                   extra=None if changed else extra)  # fmt: skip
        return Analysis(verdict, target, tuple(changed))

    def report(self) -> Report:
        """The study's report folder and its verdict (`verdict.json`), as the last `run` or
        `analyze` of the study's own left them; reads only."""
        import json  # lazy: only a report reads JSON here

        folder = contract.analysis_folder(self.name, self.resolved.spec.output_dir)
        path = folder / "verdict.json"
        verdict = json.loads(path.read_text()) if path.is_file() else None
        return Report(folder, verdict)

    def _check_store(self) -> None:
        """ValueError if the study's SQLite store is gone or broken (`scaling.state.store_check`),
        or not there yet (nothing submitted: opening it would create an empty one); the study
        folder is said once the store is not broken, as `status` says it."""
        from foundation.studypaths import missing_store, missing_store_message  # lazy: rare

        mlflow = self.resolved.mlflow
        trouble = store_trouble(mlflow.tracking_uri, mlflow.experiment, self.folder)
        if trouble is not None:
            raise ValueError(str(trouble))
        self.say(f"study folder: {self.folder}")
        store = missing_store(mlflow.tracking_uri)
        if store is not None:
            raise ValueError(missing_store_message(store))


REANALYSIS_LINE = "re-analysis by the user ({}), not the study's verdict"


def _changes(own: Judgement, margin: float | None, options: dict) -> list[str]:
    """The options the user set to something other than the study's own judgement's: each makes
    the analysis a re-analysis (``--margin 0.3``)."""
    mine = {
        "--margin": (margin, own.margin_pct),
        "--seed": (options.get("seed"), own.seed),
        "--resamples": (options.get("num_resamples"), own.num_resamples),
        "--detect-gain": (options.get("detect_gain_pct"), own.detect_gain_pct),
    }
    return [f"{flag} {v}" for flag, (v, own_v) in mine.items() if v is not None and v != own_v]


def _reanalysis(
    own: Judgement, changed: list[str], out: Path | None, margin: float | None, options: dict
) -> Judgement:
    """The user's re-analysis of the study's own judgement; refused where a sequential design
    fixes the option, or without a folder of its own."""
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
    return own.reanalysed(tuple(changed), margin_pct=margin, **options)  # baseline: as judged
