"""Progress never counts back (issue 63): a rerun of `scaling run` after an interrupt starts at
the cells the recorded state holds done, and resubmitting the cells the interrupt cancelled
takes nothing off the count; a result the recorded state truly loses is named, not silently
subtracted. The ETA starts from the plan's per-cell estimate and says so; an LR search's worst
case is spelled out."""

from __future__ import annotations

import heapq

from foundation import contract as C
from scaling.cli.live import LiveProgress
from scaling.driver.progress import CellTimeModel, Progress, SearchOutlook, clock
from scaling.spec.grid import Cell
from scaling.state.status import StatusRow

NUM_CELLS = 48


def _rows(states: dict[int, str]) -> list[StatusRow]:
    """48 cells, each pending unless `states` says otherwise."""
    return [
        StatusRow(
            Cell(f"c{i:02d}", "12K", "linear", 0, 0.01, None),
            states.get(i, C.PENDING),
            None,
            None,
            None,
        )
        for i in range(NUM_CELLS)
    ]


def _resumed_run_frames() -> list[list[StatusRow]]:
    """What the polls of a rerun see: 12 cells completed and 2 cancelled by the interrupt; the
    rerun resubmits the 2 (queued, then running), then cells complete, one fails (a retry
    left: the next round resubmits it) and the 2 end."""
    done = {i: C.COMPLETED for i in range(12)}
    return [
        _rows(done | {12: C.CANCELLED, 13: C.CANCELLED}),
        _rows(done | {12: C.QUEUED, 13: C.QUEUED} | {i: C.QUEUED for i in range(14, 48)}),
        _rows(done | {12: C.RUNNING, 13: C.RUNNING} | {i: C.QUEUED for i in range(14, 48)}),
        _rows(done | {12: C.COMPLETED, 13: C.FAILED} | {i: C.QUEUED for i in range(14, 48)}),
        _rows(done | {12: C.COMPLETED, 13: C.FAILED, 14: C.COMPLETED, 15: C.RUNNING}),
    ]


def test_the_count_of_a_resumed_run_starts_at_its_recorded_cells_and_never_goes_back():
    before = {f"c{i:02d}" for i in range(12)}  # the round driver's: completed or diverged
    progress = Progress({f"c{i:02d}": 1e9 for i in range(NUM_CELLS)}, before, slots=2)
    display = LiveProgress(progress, NUM_CELLS)
    counts = [display.bar.tasks[0].completed]  # the first frame, before any poll
    for rows in _resumed_run_frames():
        display(rows)
        counts.append(display.bar.tasks[0].completed)
    assert counts == [12, 12, 12, 12, 13, 14], counts
    assert all(b >= a for a, b in zip(counts, counts[1:], strict=False))


def test_the_plain_line_counts_results_and_says_what_failed_or_was_cancelled():
    progress = Progress({f"c{i:02d}": 1e9 for i in range(NUM_CELLS)}, set(), slots=2)
    counts = [len(progress.done(rows)) for rows in _resumed_run_frames()]
    assert counts == [12, 12, 12, 13, 14], counts
    line = progress.summary(_resumed_run_frames()[0])
    assert line.startswith("12/48 done (12 completed, 0 diverged), 2 failed or cancelled"), line


def test_a_result_the_recorded_state_loses_is_named_not_silently_counted_back():
    before = {f"c{i:02d}" for i in range(12)}
    progress = Progress({f"c{i:02d}": 1e9 for i in range(NUM_CELLS)}, before, slots=2)
    rows = _rows({i: C.COMPLETED for i in range(11)})  # c11's run deleted: pending again
    assert [r.cell_id for r in progress.lost(rows)] == ["c11"]
    assert "c11 (pending)" in progress.summary(rows)
    assert "1 lost" in progress.brief(rows)
    assert progress.lost(_rows({i: C.COMPLETED for i in range(12)})) == []


def _makespan(durations: list[float], slots: int) -> float:
    ends = [0.0] * slots
    for d in sorted(durations, reverse=True):
        heapq.heapreplace(ends, ends[0] + d)
    return max(ends)


def test_the_eta_comes_from_the_plans_cell_estimates_until_cells_are_timed():
    now = [0.0]
    planned = {"a": 1200.0, "b": 700.0, "c": 600.0, "d": 300.0}  # the plan's seconds per cell
    work = {c: 1e9 for c in planned}  # the FLOP model alone: 60 s + 2.5 ms a cell
    rows = [
        StatusRow(Cell(c, "12K", "linear", 0, 0.01, None), C.QUEUED, None, None, None)
        for c in planned
    ]
    progress = Progress(work, set(), slots=2, now=lambda: now[0], planned_s=planned)
    assert not progress.measured
    assert progress.eta_seconds(rows) == _makespan(list(planned.values()), 2) == 1500.0
    assert progress.brief(rows).endswith("; ETA 0:25:00 (plan)")

    # a: running for 200 s of its planned 1200
    rows[0] = StatusRow(Cell("a", "12K", "linear", 0, 0.01, None), C.RUNNING, None, None, None)
    progress.eta_seconds(rows)  # first seen running now
    now[0] = 200.0
    # a holds a slot 1000 s more; b then c on the other (1300), d after a (1300)
    assert progress.eta_seconds(rows) == 1300.0

    # once a cell has been timed, the ETA is fitted to what the cells took
    progress.took["d"] = 90.0
    assert progress.measured
    fitted = CellTimeModel.fit([(1e9, 90.0)], progress.prior)
    assert progress.cell_seconds("b") == fitted.seconds(1e9)
    assert "(measured)" in progress.brief(rows)


def test_the_lr_search_worst_case_is_spelled_out_on_a_line_of_its_own():
    rows = [
        StatusRow(Cell(f"c{i}", "12K", "linear", 0, 0.01, None), C.QUEUED, None, None, None)
        for i in range(3)
    ]
    search = SearchOutlook(round=0, max_rounds=1, round_work=[1e9] * 2, follower_work=[1e9] * 4)
    progress = Progress({r.cell_id: 1e9 for r in rows}, set(), slots=2, search=search)
    worst = progress.worst_seconds(rows)
    assert worst > progress.eta_seconds(rows)
    words = f"LR-search round 0; the whole search ends by ≤ {clock(worst)}"
    assert progress.outlook(rows) == words
    assert "≤" not in progress.brief(rows)  # the bar's line keeps the counts and this round
    display = LiveProgress(progress, len(rows))
    display(rows)
    assert display.bar.note == words  # drawn under the bar
    assert words in progress.summary(rows)
