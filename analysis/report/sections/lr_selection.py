"""The report's "Learning-rate selection" section, from ``verdict["lr_selection"]`` and
``verdict["lr_search"]``: per arm, size and budget the best LR, the LRs tried and usable and the
frontier's state (``analysis.stats.lr.frontier``), where the optimum lies, the diverged LRs read
as censoring (each one bounds its arm's optimum from above), then the study's LR search (its
rounds and the arms it left open) and the loss-vs-LR figure."""

from __future__ import annotations

from analysis.report import fmt

__all__ = ["censoring_sentence", "lr_blocks"]


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
            _optimum(r),
            lrs(r["next_lrs"]) if r["next_lrs"] else "",
        ]
        for r in sorted(verdict["lr_selection"], key=lambda r: (r["variant"], r["tokens"]))
    ]
    header = ["variant", "size", "tokens", "best LR", "tried", "usable", "state", "optimum"]
    b.append(("table", [*header, "add"], rows))
    b.append(
        (
            "p",
            f"Best LR = lowest mean `{verdict['lr_chosen_on']}` over all seeds of an LR; an LR "
            "is usable only when every one of its seeds completed (never chosen on the "
            "survivors). An LR whose next step up diverged counts as bracketed; a best LR at "
            "the edge of its grid makes a verdict inconclusive. Optimum: where the arm's best "
            "LR lies, ~estimate [interval): the bracket of the best LR's neighbours, or, with a "
            "neighbour on one side only, a 90% interval from the seeds' losses there and the "
            "arm's curvature; ')' ends at an LR that diverged.",
        )
    )
    censored = censoring_sentence(verdict["lr_selection"])
    if censored:
        b.append(("note", censored))
    b.extend(_search_blocks(verdict.get("lr_search")))
    if "lr_sweeps" in figures:
        caption = "Loss vs learning rate per size (★ best usable LR, red ring: at the grid edge)"
        b.append(("img", figures["lr_sweeps"], caption))
    return b


def _optimum(r: dict) -> str:
    """``~0.0021 [0.0016, 0.0032)``: the optimum's estimate and interval, ``)`` at a diverged
    LR (censored there), an open end as ``?``."""
    if r.get("optimum") is None:
        return ""
    low, high = r.get("optimum_interval") or [None, None]
    end = ")" if high is not None and high == r.get("censored_at") else "]"
    lo = fmt.lr(low) if low is not None else "?"
    return f"~{fmt.lr(r['optimum'])} [{lo}, {fmt.lr(high) if high is not None else '?'}{end}"


def _seeds(seeds: list) -> str:
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(str(s) for s in seeds)


def censoring_sentence(records: list[dict]) -> str | None:
    """One sentence naming each cell whose optimum a diverged LR bounds: ``linear 10M: diverged
    at 0.0032 (seeds 1, 2): optimum bounded below it``; None when no cell has one."""
    budgets: dict[tuple, set] = {}
    for r in records:
        budgets.setdefault((r["variant"], r["size"]), set()).add(r["tokens"])
    clauses = []
    for r in sorted(records, key=lambda r: (r["variant"], r["tokens"])):
        if r.get("censored_at") is None:
            continue
        at = r["censored_at"]
        i = next(j for j, lr in enumerate(r["diverged_lrs"]) if lr == at)
        cell = f"{r['variant']} {r['size']}"
        if len(budgets[(r["variant"], r["size"])]) > 1:
            cell += f" ({fmt.count(r['tokens'])} tokens)"
        what = "optimum bounded below it" if r["best_lr"] is not None else "no LR below it usable"
        clauses.append(
            f"{cell}: diverged at {fmt.lr(at)} ({_seeds(r['diverged_seeds'][i])}): {what}"
        )
    if not clauses:
        return None
    return (
        "Diverged runs bound each arm's optimum LR from above (censored there: neither a missing "
        "point nor a loss; they stay listed under Excluded runs): " + "; ".join(clauses) + "."
    )


def _search_blocks(search: dict | None) -> list[tuple]:
    """The study's LR search (scaling.lr_search.extend_grid): rounds, and arms it left at an
    edge."""
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
