"""The watcher of a study's rounds: status polls, retries through tracking outages, progress.

`RoundWatcher` polls the study's cells until none is queued or running, keeps polling while
MLflow or its database restarts (a refused login only for a bounded time, a vanished SQLite
store not at all), and shows the round's progress and ETA (`scaling.driver.progress`). It
decides nothing: what a round is followed by is `scaling.driver.round_driver.StudyRun`'s, which owns
one watcher and tells it the study as the LR search grows it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

from foundation import contract
from foundation.config import seconds_from_env
from scaling.backends.executors import LOCAL_POLL_S, POLL_ENV, Executor
from scaling.costs.wall import planned_seconds
from scaling.driver.progress import CellTimeModel, Progress, Reporter, SearchOutlook
from scaling.lr_search.extend_grid import search_over
from scaling.spec.grid import Cell
from scaling.spec.resolved import ResolvedStudy
from scaling.state.files.look_state import read_looks
from scaling.state.files.search_state import SearchState, SearchStateChanged, keep_state, read_state
from scaling.state.status import StatusRow, study_status
from scaling.state.store_check import StoreLost, StoreWatch
from scaling.state.tracking_refusal import (
    GIVE_UP_ENV,
    RefusalClock,
    refusal_give_up_s,
    refusal_status,
)

__all__ = ["RoundWatcher", "View", "Rows", "POLL_S", "POLL_ENV", "poll_seconds"]

POLL_S = LOCAL_POLL_S  # the local executor's; Slurm's is SLURM_POLL_S (60 s)


def poll_seconds(default: float = POLL_S) -> float:
    """The wait between status polls: `SCALING_POLL_S` seconds, else `default` (the executor's
    `default_poll_s`: 5 locally, 60 on Slurm). A round's end is seen up to this late; each poll
    reads every cell's state (MLflow and one `squeue`)."""
    return seconds_from_env(POLL_ENV, default, "the wait between status polls", positive=True)


Rows = list[StatusRow]
# What shows a round's progress while it is waited for, given the study as it is now (with the
# rounds the search added): a context (a live bar is drawn while it is open) whose value is
# called with every poll's rows.
View = Callable[[Progress, ResolvedStudy], AbstractContextManager[Callable[[Rows], None]]]


class RoundWatcher:
    """Polls one study's cells on its executor and shows a round's progress.

    `study` is the study as it is now (its owner sets it as rounds are added); `say` gets every
    line meant for a person; `view` shows the progress (default: a `Reporter` line per change);
    `poll_s` is the wait between polls (default: `poll_seconds`); `refused_give_up_s`: how long a
    tracking server refusing the login is retried before `TrackingRefused` (default:
    `scaling.state.tracking_refusal.refusal_give_up_s`); other failures are retried for good.
    """

    def __init__(
        self,
        study: ResolvedStudy,
        executor: Executor,
        say: Callable[[str], None] = lambda _msg: None,
        view: View | None = None,
        poll_s: float | None = None,
        refused_give_up_s: float | None = None,
    ) -> None:
        self.study, self.executor = study, executor
        self.say, self.view = say, view
        self.poll_s = poll_seconds(executor.default_poll_s) if poll_s is None else poll_s
        self.took: dict[str, float] = {}  # cell -> wall seconds, as the progress saw it
        give_up_s = refusal_give_up_s() if refused_give_up_s is None else refused_give_up_s
        self._refusals = RefusalClock(study.mlflow.tracking_uri, give_up_s)
        self._store = StoreWatch(study)  # a SQLite store deleted mid-study stops the driver
        # `lr_search.json` as this driver wrote it last: held to it at every poll (`keep_state`)
        self.search_known: SearchState | None = None
        self.remember_search()

    def remember_search(self) -> None:
        """Take `lr_search.json` as it is now as the driver's own (at start, after a round)."""
        if self.study.spec.lr.search is not None:
            self.search_known = read_state(self.study.folder)

    def status(self) -> Rows:
        self._store.check()
        if self.search_known is not None:
            keep_state(self.study.folder, self.search_known, self.say)
        rows = study_status(self.study)
        self._refusals.answered()
        return rows

    def wait(
        self,
        callback: Callable[[Rows], None] | None = None,
        timeout_s: float | None = None,
        busy: Callable[[], bool] | None = None,
        on_error: Callable[[Exception], None] | None = None,
    ) -> Rows:
        """Poll the grid until no cell is queued or running (and `busy()`, if given, is False;
        it is asked at every poll, and what it raises ends the wait).

        `callback` sees every poll's rows. With `on_error`, a failed status query (MLflow or its
        database restarting) is passed to it and the loop keeps polling: the cells keep
        training and spool their metrics meanwhile. TimeoutError after `timeout_s`.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            try:
                rows = self.status()
            except Exception as err:  # noqa: BLE001 - any tracking-server failure
                if on_error is None:
                    raise
                on_error(err)
                time.sleep(self.poll_s)
                continue
            if callback is not None:
                callback(rows)
            active = [r.cell_id for r in rows if r.state in contract.ACTIVE_STATES]
            # asked at every poll: `busy` raises if what it watches died (`StudyRun`)
            still_busy = busy is not None and busy()
            if not active and not still_busy:
                return rows
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(
                    f"study {self.study.name}: still active after {timeout_s} s: {active}"
                )
            time.sleep(self.poll_s)

    def watched(self, progress: Progress, busy: Callable[[], bool] | None = None) -> Rows:
        """`wait`, with the round's progress shown by the view."""
        if self.view is None:
            shown = contextlib.nullcontext(Reporter(progress, self.say))
        else:
            shown = self.view(progress, self.study)
        with shown as callback:
            return self.wait(callback=callback, busy=busy, on_error=self.unavailable)

    def unavailable(self, err: Exception) -> None:
        """A failed status poll: retried, but a refused login only for a bounded time, and a
        SQLite store that vanished not at all (`StoreLost`)."""
        if isinstance(err, (StoreLost, SearchStateChanged)):
            raise err
        self._store.check()
        status = refusal_status(err)
        if status is None:
            self._refusals.answered()
            self.say(f"status unavailable ({type(err).__name__}: {str(err)[:200]}); retrying")
            return
        first = self._refusals.since is None
        left = self._refusals.refused(status)  # TrackingRefused once the time is up
        if first:
            self.say(
                f"the tracking server refused the login (HTTP {status}); retrying for up to "
                f"{left:.0f} s ({GIVE_UP_ENV})"
            )

    def progress(self, done_before: set[str]) -> Progress:
        """The round's progress: each cell's FLOPs per device, timed as the plan assumes until
        cells end (`scaling.driver.progress`), and what the LR search can still add."""
        cost = self.study.spec.cost
        return Progress(
            {c.cell_id: _work(c) for c in self.study.cells},
            done_before,
            slots=self.executor.slots,
            prior=CellTimeModel(cost.startup_s, 1 / cost.flops_per_gpu_s),
            search=self._search_outlook(),
            look=self._last_look(),
            took=self.took,
            planned_s=planned_seconds(self.study),  # each cell's plan estimate, until timed
        )

    def _last_look(self) -> tuple[int, str] | None:
        """The latest look's number and verdict while the seeds it added run (None: no look yet,
        or the study stopped)."""
        looks = read_looks(self.study.folder)["looks"] if self.study.spec.seed_rounds else []
        if not looks or looks[-1]["stop"]:
            return None
        return int(looks[-1]["look"]), str(looks[-1]["verdict"])

    def _search_outlook(self) -> SearchOutlook | None:
        """The most an LR search still adds: `max_rounds` rounds of a cell per arm and scan
        seed, then the followers (the other seeds at each winner and its neighbours)."""
        spec = self.study.spec
        search = spec.lr.search
        if search is None or search_over(self.study):
            return None
        arms: dict[tuple[str, str], float] = {}
        for cell in self.study.cells:
            if cell.round == 0:
                arms.setdefault((cell.variant, cell.size), _work(cell))
        num_scan = len(spec.scan_seeds)
        num_follow = (len(spec.seeds) - num_scan) * (1 + 2 * search.follow_neighbours)
        return SearchOutlook(
            round=read_state(self.study.folder).round,
            max_rounds=search.max_rounds,
            round_work=[w for w in arms.values() for _ in range(num_scan)],
            follower_work=[w for w in arms.values() for _ in range(num_follow)],
            per_round_s=self.executor.per_round_overhead_s,
        )


def _work(cell: Cell) -> float:
    """What a cell's compute time scales with: its FLOPs per device."""
    return cell.flops / cell.world_size
