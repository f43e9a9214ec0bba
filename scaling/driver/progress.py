"""What a running study has done and how long the rest takes: the lines and the ETA of a round.

`Progress` counts the cells by state and estimates the time left; `Reporter` says its line when
a cell ends and at least once a minute (a pipe, CI); `scaling.cli.live.LiveProgress` draws the same
on a terminal.

The ETA models each cell's wall time as `overhead + work / rate`, where `work` is its FLOPs per
device: on small models the per-cell overhead (process start, imports, data and model set-up,
checkpoints, tracking) dominates, so a FLOP-proportional estimate reads far too short once the
big cells have ended. Both terms are fitted by least squares on the measured wall times of the
cells ended so far (seen by the polls: first seen running → seen ended). Before any cell ends
each cell takes what the plan says it takes (`planned_s`: `scaling.costs.wall.planned_seconds`,
the plan's per-cell estimate with its evaluations, `cost.step_s` and the pilot's measurements),
else the plan's assumptions (`cost.startup_s`, `cost.flops_per_gpu_s`); the line says which
("plan" or "measured"). The time left is the greedy longest-first schedule of the unfinished
cells on the executor's slots, the running ones first with what their prediction has left.
During an LR search a second line gives the round and the worst case: this round, then every
round the search can still add, then the followers.

The count of cells done is monotone: a cell is done once it has a result (completed, diverged,
or stale: a result of code changed since), so a failed or cancelled cell that a resumed run
resubmits never counted; the cells the recorded state held done when the round started count
from the first frame (`done_before`). A cell counted done that the recorded state then shows
otherwise (its run deleted) is named in the line, never silently counted back.
"""

from __future__ import annotations

import heapq
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from foundation import contract
from scaling.state.status import StatusRow, states_in_words

__all__ = [
    "Progress",
    "Reporter",
    "SearchOutlook",
    "CellTimeModel",
    "clock",
    "HEARTBEAT_S",
    "RESULT_STATES",
]

HEARTBEAT_S = 60.0
# A stale cell (its model code changed since it finished) will not run again in this submission:
# counted done, so an edit never makes the count go back, and named in the line.
_DONE_NOW = (*contract.ENDED_STATES, contract.STALE)
# What the count of done cells counts: a result, which no later submit of this run takes back
# (a failed or cancelled cell is resubmitted while it has retries left)
RESULT_STATES = (*contract.DONE_STATES, contract.STALE)
STALE_SHOWN = 3  # stale cells named in the progress line; the rest counted
# Below this relative spread of the ended cells' work (the arms of one size differ by ~10%)
# their wall times say nothing about overhead vs rate: noise would decide the slope.
MIN_SPREAD = 0.3


@dataclass(frozen=True)
class CellTimeModel:
    """A cell's wall seconds: `overhead_s + work × s_per_work` (work: FLOPs per device)."""

    overhead_s: float
    s_per_work: float

    def seconds(self, work: float) -> float:
        return self.overhead_s + work * self.s_per_work

    @staticmethod
    def fit(samples: list[tuple[float, float]], prior: CellTimeModel) -> CellTimeModel:
        """Least squares on (work, wall seconds) of the cells ended so far; `prior` before any.

        Cells of (nearly) one size cannot separate the two terms (their work differs by less
        than `MIN_SPREAD`, e.g. only the arms of the largest size, which a local round runs
        first): the prior's split is kept and scaled to what was measured. A negative term is
        clamped to 0 and the other refitted alone.
        """
        if not samples:
            return prior
        n = len(samples)
        works = [w for w, _ in samples]
        mean_w, mean_t = sum(works) / n, sum(t for _, t in samples) / n
        var = sum((w - mean_w) ** 2 for w in works)
        if max(works) <= 0 or (max(works) - min(works)) / max(works) < MIN_SPREAD:
            predicted = sum(prior.seconds(w) for w, _ in samples)
            scale = sum(t for _, t in samples) / predicted if predicted > 0 else 1.0
            return CellTimeModel(prior.overhead_s * scale, prior.s_per_work * scale)
        slope = sum((w - mean_w) * (t - mean_t) for w, t in samples) / var
        intercept = mean_t - slope * mean_w
        if slope < 0:
            return CellTimeModel(mean_t, 0.0)
        if intercept < 0:
            work_sq = sum(w * w for w, _ in samples)
            return CellTimeModel(0.0, sum(w * t for w, t in samples) / work_sq)
        return CellTimeModel(intercept, slope)


DEFAULT_PRIOR = CellTimeModel(60.0, 1 / 4e14)  # the spec's default cost.startup_s, flops_per_gpu_s


@dataclass(frozen=True)
class SearchOutlook:
    """What an LR search can still add after the current round, at most (its worst case)."""

    round: int  # the current round (0: the starting grid)
    max_rounds: int
    round_work: list[float]  # one refinement round: a cell per arm and scan seed (work each)
    follower_work: list[float]  # the follower round: the other seeds at winners and neighbours
    per_round_s: float = 0.0  # what a round costs besides its cells (the executor's)

    @property
    def rounds_left(self) -> int:
        return max(0, self.max_rounds - self.round)


@dataclass
class Progress:
    """Cells done / running / failed and an ETA (see the module) for one round being waited on.

    `work_by_cell`: each cell's FLOPs per device; `done_before`: cells with a result when this
    round started (the recorded state), counted done from the first frame; `slots`: cells that
    run at once; `prior`: the plan's cell-time assumptions; `took`: the cells timed so far,
    also in earlier rounds; `planned_s`: each cell's wall seconds as `scaling plan` estimates
    them (`scaling.costs.wall.planned_seconds`), used until a cell has been timed.
    """

    work_by_cell: dict[str, float]
    done_before: set[str]
    slots: int = 1
    prior: CellTimeModel = DEFAULT_PRIOR
    search: SearchOutlook | None = None
    now: Callable[[], float] = time.monotonic
    # cell → wall seconds of each cell seen from start to end; the driver hands the same dict
    # to every round's Progress, so a new round starts with the fit of the rounds before
    took: dict[str, float] = field(default_factory=dict)
    # sequential seeds: the latest look's number and verdict, while its seeds run
    look: tuple[int, str] | None = None
    planned_s: dict[str, float] | None = None
    start: float = field(init=False)
    started: dict[str, float] = field(default_factory=dict, init=False)
    # every cell counted done so far: a frame never counts fewer without naming the missing
    counted: set[str] = field(init=False)

    def __post_init__(self) -> None:
        self.start = self.now()
        self.counted = set(self.done_before)

    @staticmethod
    def ended(rows: list[StatusRow]) -> set[str]:
        """Cells that will not run again in this submission (completed, diverged, failed,
        stale...)."""
        return {r.cell_id for r in rows if r.state in _DONE_NOW}

    def done(self, rows: list[StatusRow]) -> set[str]:
        """The cells done in this frame: those with a result (`RESULT_STATES`); remembered, so
        that `lost` names a cell counted before that the recorded state no longer holds done."""
        now_done = {r.cell_id for r in rows if r.state in RESULT_STATES}
        self.counted |= now_done
        return now_done

    def lost(self, rows: list[StatusRow]) -> list[StatusRow]:
        """Cells counted done earlier in this run (or held done when it started) whose recorded
        state now says otherwise: the one way the count goes back, and the line says so."""
        return [r for r in rows if r.cell_id in self.counted and r.state not in RESULT_STATES]

    def observe(self, rows: list[StatusRow]) -> None:
        """Note which cells were first seen running, and how long each one seen ending took."""
        now = self.now()
        for row in rows:
            cid = row.cell_id
            if row.state == contract.RUNNING:
                self.started.setdefault(cid, now)
            elif row.state in _DONE_NOW and cid not in self.took and cid in self.started:
                self.took[cid] = now - self.started[cid]

    def model(self) -> CellTimeModel:
        samples = [
            (self.work_by_cell[c], t) for c, t in self.took.items() if c in self.work_by_cell
        ]
        return CellTimeModel.fit(samples, self.prior)

    @property
    def measured(self) -> bool:
        """True once a cell of the study has been timed: the ETA is then fitted to what the
        cells took (`CellTimeModel.fit`), before that it is the plan's."""
        return any(c in self.work_by_cell for c in self.took)

    def cell_seconds(self, cell_id: str) -> float:
        """A cell's predicted wall seconds: fitted once cells were timed, else the plan's."""
        if not self.measured and self.planned_s is not None and cell_id in self.planned_s:
            return self.planned_s[cell_id]
        return self.model().seconds(self.work_by_cell.get(cell_id, 0.0))

    def eta_seconds(self, rows: list[StatusRow]) -> float:
        """Seconds until every cell of this round has ended (the module's model)."""
        self.observe(rows)
        now = self.now()
        running, queued = [], []
        for row in rows:
            if row.state in _DONE_NOW:
                continue
            predicted = self.cell_seconds(row.cell_id)
            if row.cell_id in self.started:
                running.append(max(0.0, predicted - (now - self.started[row.cell_id])))
            else:
                queued.append(predicted)
        return _makespan(running, queued, self.slots)

    def worst_seconds(self, rows: list[StatusRow]) -> float:
        """This round, then every round the LR search can still add, then its followers."""
        left = self.eta_seconds(rows)
        if self.search is None:
            return left
        model, search = self.model(), self.search
        one_round = [model.seconds(w) for w in search.round_work]
        left += search.rounds_left * (search.per_round_s + _makespan([], one_round, self.slots))
        followers = [model.seconds(w) for w in search.follower_work]
        if followers:
            left += search.per_round_s + _makespan([], followers, self.slots)
        return left

    def outlook(self, rows: list[StatusRow]) -> str:
        """During an LR search, the round and the search's worst-case end in words:
        "LR-search round 0; the whole search ends by ≤ 0:11:19" ("" without a search)."""
        if self.search is None:
            return ""
        worst = clock(self.worst_seconds(rows))
        return f"LR-search round {self.search.round}; the whole search ends by ≤ {worst}"

    def summary(self, rows: list[StatusRow]) -> str:
        states = Counter(r.state for r in rows)
        done = self.done(rows)
        elapsed = self.now() - self.start
        failed = states[contract.FAILED] + states[contract.CANCELLED]
        given_up = sum(r.given_up for r in rows)
        stale = f", {states[contract.STALE]} stale" if states[contract.STALE] else ""
        source = "measured" if self.measured else "the plan's cell times"
        outlook = self.outlook(rows)
        return (
            f"{len(done)}/{len(rows)} done ({states[contract.COMPLETED]} completed, "
            f"{states[contract.DIVERGED]} diverged{stale}), {failed} failed or cancelled"
            + (f" ({given_up} given up)" if given_up else "")
            + f", {states[contract.RUNNING]} running, {states[contract.QUEUED]} queued; "
            f"elapsed {clock(elapsed)}, ETA {clock(self.eta_seconds(rows))} ({source})"
            + ("" if not outlook else f"; {outlook}")
            + ("" if self.look is None else f"; {self._look_text()}")
            + _stale_text(rows)
            + _lost_text(self.lost(rows))
        )

    def _look_text(self) -> str:
        number, verdict = self.look or (0, "")
        return f"look {number}: {verdict}, running the seeds of look {number + 1}"

    def brief(self, rows: list[StatusRow]) -> str:
        """The live bar's text: "2 completed, 2 running, 20 queued, 1 failed; ETA 0:04:10 (plan)"
        (states with no cell left out, but for completed; the bar shows the rest; the source
        of the ETA, "plan" or "measured", where it fits)."""
        text = states_in_words((r.state for r in rows), BRIEF_ORDER, [contract.COMPLETED])
        lost = self.lost(rows)
        if lost:
            text += f", {len(lost)} lost"
        text += f"; ETA {clock(self.eta_seconds(rows))}"
        source = " (measured)" if self.measured else " (plan)"
        text += source if len(text) + len(source) <= BRIEF_WIDTH else ""
        if self.look is not None:  # "L1 undetected": the look whose seeds run now follows it
            word = f"; L{self.look[0]} {self.look[1]}"
            text += word if len(text) + len(word) <= BRIEF_WIDTH else f"; L{self.look[0]}"
        return text


def _lost_text(lost: list[StatusRow]) -> str:
    """``; 1 counted done before, now pending: 12K-linear-s0-lr0.01 (its result is gone from
    the recorded state)`` or ""."""
    if not lost:
        return ""
    names = ", ".join(f"{r.cell_id} ({r.state})" for r in lost[:STALE_SHOWN])
    more = f" and {len(lost) - STALE_SHOWN} more" if len(lost) > STALE_SHOWN else ""
    return (
        f"; {len(lost)} counted done before, no longer done in the recorded state: {names}{more}"
        " (their results are gone: `scaling status` shows them)"
    )


def _stale_text(rows: list[StatusRow]) -> str:
    """``; 2 stale (model code changed since: 30K-gated-s0-lr0.002, ...): ...`` or ""."""
    stale = [r for r in rows if r.state == contract.STALE]
    if not stale:
        return ""
    names = ", ".join(r.cell_id for r in stale[:STALE_SHOWN])
    more = f" and {len(stale) - STALE_SHOWN} more" if len(stale) > STALE_SHOWN else ""
    files = stale[0].note.partition("; --rerun")[0]  # what changed, as `status` says it
    return (
        f"; {len(stale)} stale ({names}{more}: {files}): nothing is judged until they are "
        "rerun (--rerun-stale) or accepted (--accept-stale)"
    )


BRIEF_WIDTH = 59  # what the live bar leaves its text in 80 columns (`scaling.cli.live`)
# the live bar's counts, in this order (completed even at 0; the bar shows the rest)
BRIEF_ORDER = (
    contract.COMPLETED,
    contract.RUNNING,
    contract.QUEUED,
    contract.FAILED,
    contract.DIVERGED,
    contract.CANCELLED,
    contract.STALE,
)


def _makespan(running: list[float], queued: list[float], slots: int) -> float:
    """Length of a greedy schedule: `running` hold slots first, then `queued` longest first."""
    if not running and not queued:
        return 0.0
    ends = [*running, *[0.0] * max(0, slots - len(running))]
    heapq.heapify(ends)
    for duration in sorted(queued, reverse=True):
        heapq.heapreplace(ends, ends[0] + duration)  # the slot that frees first
    return max(ends)


def clock(seconds: float) -> str:
    """`3725.4` → "1:02:05"."""
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class Reporter:
    """Says the progress line when a cell ends, and at least once a minute while cells run."""

    def __init__(self, progress: Progress, say: Callable[[str], None]) -> None:
        self.progress, self.say = progress, say
        self.last_ended: set[str] | None = None
        self.last_time = 0.0

    def __call__(self, rows: list[StatusRow]) -> None:
        self.progress.observe(rows)
        ended = self.progress.ended(rows)
        if ended != self.last_ended or time.monotonic() - self.last_time > HEARTBEAT_S:
            self.say(self.progress.summary(rows))
            self.last_ended, self.last_time = ended, time.monotonic()
