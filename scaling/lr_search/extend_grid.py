"""Adaptive LR refinement (`lr.search`): extend each arm's LR grid until its optimum is inside.

Why: a fair comparison needs every arm at its own best LR at every size (FACTS: the 124M "gain"
vanished against a tuned baseline). A fixed grid that misses an arm's optimum only shows up as
a flag in the report after the GPU-hours are spent; here the study extends the grid itself.

Rounds. Round 0 is the starting grid, run by the first `scan_seeds` seeds. When every cell of
the study has ended, `analysis.lr_frontier` judges the scan seeds' runs per (variant, size,
tokens); each arm at `edge_low` / `edge_high` gets its `next_lrs` (one step beyond the edge) as
round r + 1, until no arm is at an edge or `max_rounds` rounds were added. Then the follower
round: the other seeds at each arm's winner and `follow_neighbours` tried LRs either side.
Arms with no usable LR stop there (no followers); `bracketed_by_divergence` counts as interior.

State: `<study folder>/lr_search.json`, written atomically *before* a round is submitted, holds
every added (variant, size, tokens, lr, seeds, round, reason) and whether the search ended.
`scaling.spec.loader.resolve` turns it into cells through the same `scaling.spec.grid` path as the
starting grid, so a rerun after a crash mid-round resubmits only what is missing (submit skips
finished cells), and a crash between rounds recomputes the same next round from MLflow: the
decision is a pure function of the runs' results (`decide_round`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from foundation import contract
from foundation.studypaths import missing_store
from scaling.lr_search import law_transfer
from scaling.spec.grid import cell_id
from scaling.spec.loader import resolve
from scaling.spec.resolved import ResolvedStudy
from scaling.spec.study import StudySpec
from scaling.state.files.search_state import AddedLR, SearchState, read_state, write_state
from scaling.state.mlflow_state import cell_runs
from scaling.state.run_cache import CellRun
from scaling.state.status import StatusRow, cell_state, study_status

if TYPE_CHECKING:
    import pandas as pd

    from analysis.stats.lr.frontier import LRFrontier

__all__ = ["scan_table", "decide_round", "edge_scans", "advance", "search_over", "status_lines"]

EDGES = ("edge_low", "edge_high")


def scan_table(
    study: ResolvedStudy, rows: list[StatusRow], runs: dict[str, CellRun]
) -> pd.DataFrame:
    """The analysis run table of the study's cells, in the state vocabulary of `status`.

    Built from the same MLflow runs `analysis.tables.mlflow_io.load_study_runs` reads, row by row
    through the same `analysis.tables.study_table.run_record` (every column the verdict reads,
    `flops_counted` among them), but through the study's cells: a crashed cell never logged its
    `tokens`, and the search must still count it (as failed) instead of refusing the whole table.
    A WSD stable run is left out, as the report leaves it out: its branches are the measurements.
    A stale cell (`status` says so) keeps its run's own state and code digest, so `status`'s
    LR-search lines read it as the report would.
    """
    # lazy: pandas and the analysis, paid when a round ends or a look is due
    from analysis.tables.study_table import effective_digest, run_record, run_table
    from models.accounting import flops_counted, num_nonembedding_params

    cells = {c.cell_id: c for c in study.cells}
    records = []
    for row in rows:
        cell, run = cells[row.cell_id], runs.get(row.cell_id)
        if cell.kind == contract.KIND_STABLE:
            continue
        records.append(
            run_record(
                variant=cell.variant,
                size=cell.size,
                num_nonembedding_params=num_nonembedding_params(cell.run.model),
                num_params_total=None,
                tokens=cell.tokens,
                flops=cell.flops,
                flops_counted=flops_counted(cell.run.model),  # what the job tags its run with
                code_digest=effective_digest(run.code_digest, run.code_accepted) if run else None,
                seed=cell.seed,
                lr=cell.lr,
                final_val_loss=run.final_val_loss if run else None,
                select_val_loss=run.select_loss if run else None,
                # a stale cell's result is its run's (the report's state); its digest says
                # which code it stands for, and a run stops before judging it (`stop_if_stale`)
                status=cell_state(run, None) if row.state == contract.STALE else row.state,
                run_id=run.run_id if run else row.cell_id,
            )
        )
    return run_table(records, f"study {study.name}")


def _arm(f: LRFrontier) -> str:
    # lazy: pandas (analysis.stats.lr.frontier)
    from analysis.stats.lr.frontier import fmt_lr

    best = "no usable LR" if f.best_lr is None else f"best {fmt_lr(f.best_lr)}"
    return f"{f.variant} {f.size} @{f.tokens:.3g} tokens: {f.state}, {best}"


def decide_round(
    spec: StudySpec, table: pd.DataFrame, state: SearchState, known: set[str]
) -> SearchState:
    """The next state after every cell so far has ended: one more round, or the followers.

    Pure: the same runs give the same next round (a crash between rounds recomputes it).
    `table` holds the study's runs (`scan_table`); `known` the cell ids that exist, so an LR
    that rounds to a tried cell id (3 significant digits) counts as tried and is not re-added.
    """
    # lazy: pandas, paid when a round ends
    from analysis.stats.lr.frontier import fmt_lr, lr_frontier

    search = spec.lr.search
    assert search is not None and not state.ended, "decide_round() runs only during a search"
    scan = spec.scan_seeds
    frontiers = lr_frontier(table[table["seed"].isin(scan)], step_factor=search.step_factor)
    # every edge is extended, a law's scan's too: the analysis compares an arm only at a best
    # LR with a neighbour on each side (else the verdict is inconclusive)
    edges = [f for f in frontiers if f.state in EDGES]
    step = state.round + 1
    wanted = [
        (f, lr, f"{f.state} at {fmt_lr(f.lrs[0] if f.state == 'edge_low' else f.lrs[-1])}")
        for f in edges
        for lr in f.next_lrs
    ]
    if search.find_edge:
        wanted += edge_scans(frontiers, search.step_factor)
    if wanted and law_transfer.rounds_since_wave(state) < search.max_rounds:
        new: dict[tuple[str, str, float], AddedLR] = {}
        for f, lr, why in wanted:
            lr = float(f"{lr:.10g}")  # 0.1, not 0.10000000000000002, in the state file
            tried = any(cell_id(f.size, f.variant, s, lr) in known for s in scan)
            key = (f.variant, f.size, float(f"{lr:.3g}"))
            if not tried and key not in new:
                new[key] = AddedLR(f.variant, f.size, f.tokens, lr, scan, step, why)
        if new:
            return SearchState([*state.added, *new.values()])
    wave = law_transfer.next_wave(spec, frontiers, state, step) if law_transfer.is_on(spec) else []
    if wave:  # the next size, smallest first, on each arm's law (or its full grid)
        return SearchState([*state.added, *wave])
    found_no_edge = edge_scans(frontiers, search.step_factor) if search.find_edge else []
    followers = [s for s in spec.seeds if s not in scan]
    added = []
    for f in frontiers:
        if f.best_lr is None or not followers:
            continue
        i = f.lrs.index(f.best_lr)
        reach = search.follow_neighbours
        for lr in f.lrs[max(0, i - reach) : i + reach + 1]:
            if lr in f.usable_lrs:  # a diverged or failed neighbour already brackets; skip it
                role = "winner" if lr == f.best_lr else f"neighbour of {fmt_lr(f.best_lr)}"
                added.append(AddedLR(f.variant, f.size, f.tokens, lr, followers, step, role))
    return SearchState(
        [*state.added, *added],
        ended=True,
        open_arms=[_arm(f) for f in edges] + [_unfound(f) for f, _, _ in found_no_edge],
        stopped_arms=[_arm(f) for f in frontiers if f.state == "no_usable_lr"],
        broken_laws=law_transfer.broken_laws(spec, frontiers) if law_transfer.is_on(spec) else [],
    )


def edge_scans(
    frontiers: list[LRFrontier], step_factor: float | None
) -> list[tuple[LRFrontier, float, str]]:
    """`find_edge`: (arm, LR, why) one search step above each arm's highest LR, for every arm
    none of whose scanned cells has diverged yet; the scan stops at the arm's first divergence.
    """
    from analysis.stats.lr.frontier import fmt_lr, grid_step  # lazy: pandas, as in decide_round

    return [
        (
            f,
            f.lrs[-1] * grid_step(f.lrs, step_factor),
            f"find_edge: none diverged up to {fmt_lr(f.lrs[-1])}",
        )
        for f in frontiers
        if not f.diverged_lrs
    ]


def _unfound(f: LRFrontier) -> str:
    # lazy: pandas (analysis.stats.lr.frontier)
    from analysis.stats.lr.frontier import fmt_lr

    return f"{f.variant} {f.size} @{f.tokens:.3g} tokens: no divergence up to {fmt_lr(f.lrs[-1])}"


def _describe(before: SearchState, after: SearchState) -> list[str]:
    new = after.added[len(before.added) :]
    lines = []
    if new:
        rounds = "follower round" if after.ended else "LR-search round"
        if not after.ended and new[0].reason.startswith(("law", "wave")):
            rounds = f"size {new[0].size} (LR transfer wave), round"
        lines.append(f"{rounds} {after.round}: {len(new)} LR(s) added")
        lines += [
            f"  {a.variant} {a.size}: lr {a.lr:.3g} seeds {a.seeds} ({a.reason})" for a in new
        ]
    if after.ended:
        lines.append("LR search ended" + ("" if new else " (no followers to add)"))
        lines += [f"  left at an edge (max_rounds spent): {arm}" for arm in after.open_arms]
        lines += [f"  stopped, every LR lost a seed: {arm}" for arm in after.stopped_arms]
        lines += [f"  LR law broken, full scan resumed: {why}" for why in after.broken_laws]
    return lines


def search_over(study: ResolvedStudy) -> bool:
    """True when the study has no search, or its search has ended."""
    return study.spec.lr.search is None or read_state(study.folder).ended


def advance(
    study: ResolvedStudy,
    rows: list[StatusRow] | None = None,
    say: Callable[[str], None] = print,
    allow_failed: bool = False,
) -> ResolvedStudy | None:
    """Write the next round if the current one has ended; the study with its cells, or None.

    None: no search, the search has ended, or some cell is still pending, queued or running,
    or (unless `allow_failed`) failed or cancelled: a round is judged on results, so a cell a
    crash killed is retried first (`submit` does), else its LR would count as failed. A cell
    `submit` has given up on (`study.retries`) is judged as failed.
    The state file is written before the caller submits the new cells.
    """
    if search_over(study):
        return None
    rows = study_status(study) if rows is None else rows
    judged = contract.ENDED_STATES if allow_failed else contract.DONE_STATES
    if any(r.state not in judged and not r.given_up for r in rows):
        return None
    before = read_state(study.folder)
    table = scan_table(study, rows, cell_runs(study))
    after = decide_round(study.spec, table, before, {c.cell_id for c in study.cells})
    write_state(study.folder, after)
    for line in _describe(before, after):
        say(line)
    return resolve(study.spec)


def _picked_by(spec) -> str:
    """Which loss the best LR is picked on: the selection windows' when the study has some
    (not the val/loss column beside it), else val/loss itself (`num_select_windows: 0`)."""
    if spec.data.num_select_windows > 0:
        return f"lr search: best LR by {contract.VAL_SELECT} (not {contract.VAL_LOSS})"
    return f"lr search: best LR by {contract.VAL_LOSS} (num_select_windows: 0, no selection set)"


def status_lines(study: ResolvedStudy, rows: list[StatusRow]) -> list[str]:
    """`scaling status`: the round, each arm's current best LR, and which arms are still open."""
    # lazy: pandas, for a search's status
    from analysis.stats.lr.frontier import fmt_lr, lr_frontier

    spec = study.spec
    if spec.lr.search is None or not rows:
        return []
    state = read_state(study.folder)
    rounds = spec.lr.search.max_rounds
    if missing_store(spec.mlflow.tracking_uri) is not None:  # never run: create no store
        return [f"lr search: round {state.round} of at most {rounds}; no cell has run yet"]
    table = scan_table(study, rows, cell_runs(study))
    scan = table[table["seed"].isin(spec.scan_seeds)]
    frontiers = lr_frontier(scan, step_factor=spec.lr.search.step_factor)
    where = "ended" if state.ended else f"round {state.round} of at most {rounds}"
    lines = [f"lr search: {where}", _picked_by(spec)]
    for f in frontiers:
        best = fmt_lr(f.best_lr) if f.best_lr is not None else "none"
        is_open = f.state in EDGES or f.state == "no_usable_lr"
        lines.append(
            f"lr search: {f.variant} {f.size} best {best} {f.state}"
            + (" open" if is_open and not state.ended else "")
        )
    return lines
