"""What `scaling status` prints: the whole grid when it is small, a summary when it is large.

A person checking a 2,000-cell study wants to know how far it is and what needs attention, not
to scroll 2,000 rows: above `FULL_GRID_MAX` cells the default is the counts by state, one line
per (size, variant) with its counts and best validation loss, and the cells that are neither
completed nor pending (failed, diverged, cancelled, running, queued: the ones to act on or wait
for). `--all` lists every cell. Every table ends with the tally line ("1990 completed, 10
failed"), in the one state vocabulary, so piped output stays greppable.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from foundation import contract
from scaling.state.status import StatusRow, states_in_words

__all__ = [
    "FULL_GRID_MAX",
    "ATTENTION_MAX",
    "EXIT_CELLS_FAILED",
    "EXIT_NOT_RUNNING",
    "exit_words",
    "tally",
    "status_tables",
    "exit_code",
    "open_question_lines",
]

FULL_GRID_MAX = 100  # a grid this small is listed cell by cell by default
ATTENTION_MAX = 100  # at most this many non-completed cells listed by default
# Exit status of `scaling run` and `scaling status --watch` when the study ended with a cell
# failed or cancelled (after the analysis of what finished): a script or CI job sees it. 2 is
# a bad study file (typer's usage errors too), 1 an unexpected error.
EXIT_CELLS_FAILED = 3
# ... when nothing failed but cells are still pending with no job queued or running: no driver
# submits them (it was stopped or killed), and `scaling run` goes on (docs/studies.md)
EXIT_NOT_RUNNING = 5


def exit_code(rows: list[StatusRow]) -> int:
    """0 if every cell has a result (completed or diverged); `EXIT_CELLS_FAILED` if a cell has
    none for another reason (failed, cancelled, stale); else, cells only pending,
    `EXIT_NOT_RUNNING`.

    A diverged cell is a result (the LR was too high), as for the parent run's FINISHED; a
    failed or cancelled one is not, and rerunning the command retries it.
    """
    return exit_words(rows)[0]


def exit_words(rows: list[StatusRow]) -> tuple[int, str]:
    """The exit status and the one line that says why, as the counts have it ("" for 0)."""
    counts = Counter(r.state for r in rows if r.state not in contract.DONE_STATES)
    if not counts:
        return 0, ""
    if counts[contract.FAILED] or counts[contract.CANCELLED]:
        return EXIT_CELLS_FAILED, (
            "some cells failed or were cancelled (exit status 3); `scaling run` or `scaling "
            "submit` retries them"
        )
    if set(counts) == {contract.PENDING}:
        return EXIT_NOT_RUNNING, (
            f"the study is not running: {counts[contract.PENDING]} cell(s) pending and no job "
            f"queued or running, so no driver submits them (exit status {EXIT_NOT_RUNNING}); "
            "`scaling run` goes on"
        )
    left = states_in_words(r.state for r in rows if r.state not in contract.DONE_STATES)
    return EXIT_CELLS_FAILED, (
        f"cells without a result: {left} (exit status 3); `scaling status` says why"
    )


def tally(rows: list[StatusRow]) -> str:
    """``"1990 completed, 10 failed"``: the count of each state present, in `STATES` order."""
    return states_in_words(r.state for r in rows)


def _state_text(r: StatusRow) -> str:
    """The state, with why (a note) or how far (a running cell's step of its total)."""
    why = "; ".join(part for part in (r.note, r.cause) if part)  # a failed job: its cause
    if why:
        return f"{r.state} ({why})"
    if r.state == contract.RUNNING and r.num_steps:
        return f"{r.state} (step {r.step or 0}/{r.num_steps})"
    return r.state


def _cell_rows(rows: list[StatusRow]) -> list[list[str]]:
    return [
        [
            r.cell_id,
            _state_text(r),
            f"{r.val_loss:.4f}" if r.val_loss is not None else "",
            r.job_id or "",
            (r.run_id or "")[:12],
        ]
        for r in rows
    ]


CELL_HEADER = ["cell", "state", "val loss", "job", "run"]


def status_tables(
    name: str, rows: list[StatusRow], show_all: bool = False
) -> list[tuple[str, list[str], list[list[str]], str]]:
    """The tables to print, as (title, header, rows, footer) each."""
    title = f"study {name}: status"
    if show_all or len(rows) <= FULL_GRID_MAX:
        return [(title, CELL_HEADER, _cell_rows(rows), tally(rows))]
    groups: dict[tuple[str, str], list[StatusRow]] = defaultdict(list)
    for r in rows:
        groups[(r.size, r.variant)].append(r)
    present = [s for s in contract.STATES if any(r.state == s for r in rows)]
    summary = []
    for (size, variant), members in sorted(
        groups.items(), key=lambda kv: (contract.size_key(kv[0][0]), kv[0][1])
    ):
        counts = Counter(r.state for r in members)
        losses = [
            r.val_loss for r in members if r.state == contract.COMPLETED and r.val_loss is not None
        ]
        best = f"{min(losses):.4f}" if losses else ""
        by_state = [str(counts[s]) for s in present]
        summary.append([size, variant, str(len(members)), *by_state, best])
    tables = [
        (
            f"{title} by size and variant",
            ["size", "variant", "cells", *present, "best val loss"],
            summary,
            f"{tally(rows)} ({len(rows)} cells; --all lists each one)",
        )
    ]
    attention = [r for r in rows if r.state not in (contract.COMPLETED, contract.PENDING)]
    if attention:
        shown = attention[:ATTENTION_MAX]
        more = len(attention) - len(shown)
        footer = f"{len(attention)} cell(s) neither completed nor pending"
        if more:
            footer += f"; {more} more not shown (--all lists every cell)"
        tables.append((f"{title}: cells to watch", CELL_HEADER, _cell_rows(shown), footer))
    return tables


def open_question_lines(verdict: dict | None, state: dict | None) -> list[str]:
    """The lines under the grid on an open question: each unresolved variant's best option, as
    the terminal prints it after the verdict (verdict.json's `resolve`,
    `analysis.report.sections.resolve.resolve_lines`), then, where `run --resolve` declared a
    plan (resolve.json), its path's state: how it ended (`scaling.driver.resolve.ended_line`),
    or how far it went (looks judged, extensions bought, device-hours spent of the budget)."""
    from analysis.report.sections.resolve import resolve_lines  # lazy: `scaling --help`

    lines = resolve_lines(verdict) if verdict else []
    if state is None:
        return lines
    if state.get("path"):
        from scaling.driver.resolve import ended_line  # lazy: the driver, once a path ended

        return [*lines, ended_line(state["path"])]
    plan, looks = state["plan"], state["looks"]
    bought = [look["bought"] for look in looks if look.get("bought")]
    spent = sum(float(b.get("cost") or 0.0) for b in bought)
    judged = sum("words" in look for look in looks)
    return [
        *lines,
        f"resolve: not ended, {judged} look(s) judged, {len(bought)} of at most "
        f"{plan['max_looks']} extension(s) bought, {spent:.3g} of {plan['budget']:g} "
        "device-hours; run --resolve again with the same flags to go on",
    ]
