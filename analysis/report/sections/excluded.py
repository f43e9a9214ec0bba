"""The report's "Excluded runs" section: every run the verdict did not use, and why, in words.

verdict.json's ``excluded_runs`` gives each run's reason as the analysis decided it: its own
state (failed, diverged), or "its LR (or cell) lost a seed" when the run completed but its LR
is not usable at that size (an LR counts only when every seed ran it and completed,
``analysis.stats.lr.frontier``). That second reason also covers an LR no seed lost: one that a
two-stage LR search ran with its scan seeds only (``follow_neighbours: 0``). Such an LR is told
apart here by its runs: every one of them completed, so none was lost; it is named a scan-only
LR, one seed (or a few) by design.
"""

from __future__ import annotations

from analysis.report import fmt

__all__ = ["LOST_SEED", "excluded_blocks", "reason_text"]

LOST_SEED = "its LR (or cell) lost a seed"  # how analysis.stats.analyze words it


def _lr_key(r: dict) -> tuple:
    return r["variant"], r["size"], r["lr"]


def reason_text(r: dict, runs: list[dict], by_design: bool) -> str:
    """``r``'s reason for a reader: a completed run of an LR whose every run completed (none
    lost a seed) is a scan-only LR; any other reason as the verdict gives it. ``by_design``: the
    study ran an LR search, so the missing seeds were never meant to run that LR."""
    if not str(r["reason"]).startswith(LOST_SEED):
        return r["reason"]
    same = [x for x in runs if _lr_key(x) == _lr_key(r)]
    if not all(str(x["reason"]).startswith(LOST_SEED) for x in same):
        return r["reason"]  # a seed of this LR failed or diverged: it did lose one
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
