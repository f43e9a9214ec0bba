"""The report's "Learning-rate selection" section, from ``verdict["lr_selection"]`` and
``verdict["lr_search"]``: per arm, size and budget the best LR, the LRs tried and usable and the
frontier's state (``analysis.stats.lr.frontier``), then the study's LR search (its rounds and
the arms it left open) and the loss-vs-LR figure."""

from __future__ import annotations

from analysis.report import fmt

__all__ = ["lr_blocks"]


def lr_blocks(verdict: dict, figures: dict[str, str]) -> list[tuple]:
    b: list[tuple] = [("h", "Learning-rate selection")]
    if not verdict["lr_selection"]:
        b.append(("p", "No LR recorded: each arm's tuning could not be checked."))
        return b
    lrs = lambda xs: ", ".join(fmt.lr(x) for x in xs) or "none"  # noqa: E731
    rows = [
        [
            r["variant"],
            r["size"],
            fmt.count(r["tokens"]),
            fmt.lr(r["best_lr"]),
            lrs(r["lrs"]),
            lrs(r["usable_lrs"]),
            r["state"] if r["bracketed"] else f"[[inconclusive|{r['state']}]]",
            lrs(r["next_lrs"]) if r["next_lrs"] else "",
        ]
        for r in sorted(verdict["lr_selection"], key=lambda r: (r["variant"], r["tokens"]))
    ]
    header = ["variant", "size", "tokens", "best LR", "tried", "usable", "state", "add"]
    b.append(("table", header, rows))
    b.append(
        (
            "p",
            f"Best LR = lowest mean `{verdict['lr_chosen_on']}` over all seeds of an LR; an LR "
            "is usable only when every one of its seeds completed (never chosen on the "
            "survivors). An LR whose next step up diverged counts as bracketed; a best LR at "
            "the edge of its grid makes a verdict inconclusive.",
        )
    )
    b.extend(_search_blocks(verdict.get("lr_search")))
    if "lr_sweeps" in figures:
        caption = "Loss vs learning rate per size (★ best usable LR, red ring: at the grid edge)"
        b.append(("img", figures["lr_sweeps"], caption))
    return b


def _search_blocks(search: dict | None) -> list[tuple]:
    """The study's LR search (scaling.rounds.refine): rounds, and arms it left at an edge."""
    if search is None:
        return []
    text = (
        f"LR search: {search['rounds']} round(s) after the starting grid added "
        f"{search['num_added_cells']} cell(s); an LR counts only if every seed ran it, so a "
        "scan-only LR never wins."
    )
    b: list[tuple] = [("p", text)]
    if search["open_arms"]:
        b.append(
            (
                "note",
                "Left at an edge when max_rounds stopped the search: "
                + "; ".join(search["open_arms"]),
            )
        )
    if search["stopped_arms"]:
        b.append(("note", "No usable LR (search stopped): " + "; ".join(search["stopped_arms"])))
    return b
