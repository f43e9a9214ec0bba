"""The report's "Excluded runs" section: every run the verdict did not use, and why, in words.

verdict.json's ``excluded_runs`` gives each run's reason as the analysis decided it
(``analysis.stats.analyze``): its own state (failed, diverged); "its LR (or cell) lost a seed"
when the run completed but another run of its LR at that size did not (an LR counts only when
every seed ran it and completed, ``analysis.stats.lr.frontier``); or a scan-only LR, every run of
it usable but not every seed ran it: one that a two-stage LR search ran with its scan seeds only
(``follow_neighbours: 0``). The report says how many seeds ran a scan-only LR, and that the LR
search meant it so where the study ran one.
"""

from __future__ import annotations

from analysis.report import fmt
from analysis.stats.variance.excluded import SCAN_ONLY

__all__ = ["excluded_blocks", "reason_text"]


def _lr_key(r: dict) -> tuple:
    return r["variant"], r["size"], r["lr"]


def reason_text(r: dict, runs: list[dict], by_design: bool) -> str:
    """``r``'s reason for a reader: a scan-only LR with how many seeds ran it; any other
    reason as the verdict gives it. ``by_design``: the study ran an LR search, so the missing
    seeds were never meant to run that LR."""
    if r["reason"] != SCAN_ONLY:
        return r["reason"]
    same = [x for x in runs if _lr_key(x) == _lr_key(r)]
    seeds = "one seed" if len(same) == 1 else f"{len(same)} seeds"
    if by_design:
        return f"scan-only LR: {seeds} by design (the LR search's scan), never chosen"
    return f"scan-only LR: {seeds} ran it, not every seed, so it is never chosen"


def excluded_blocks(verdict: dict) -> list[tuple]:
    b: list[tuple] = [("h", "Excluded runs")]
    runs = verdict["excluded_runs"]
    if not runs:
        b.append(("p", "None."))
        return b
    by_design = verdict.get("lr_search") is not None
    rows = [
        [r["run_id"], r["variant"], r["size"], r["seed"], fmt.lr(r["lr"])]
        + [reason_text(r, runs, by_design)]
        for r in runs
    ]
    b.append(("table", ["run", "variant", "size", "seed", "lr", "reason"], rows))
    scan = sum(row[-1].startswith("scan-only LR") for row in rows)
    if scan:
        b.append(
            (
                "p",
                f"{scan} of these ran at scan-only LRs: an LR counts only when every seed ran it "
                "and completed; a scan-only LR was run by fewer seeds and lost none.",
            )
        )
    return b
