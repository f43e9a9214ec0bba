"""The report's "What would resolve it" section and the terminal's lines after the verdict.

Read from verdict.json's ``resolve`` (``analysis.stats.resolve.summary``): for each unresolved
variant, the options (more seeds, a finer LR grid, the LRs past an unbracketed best LR, one more
size, longer training), each with
its cost, the deciding interval's predicted half-width, the predicted probability that the next
look resolves the verdict, and the study-file edit that carries it out; best probability per
device-hour first; then each unresolved downstream task's (``resolve.tasks``: more paired
seeds). Absent when every variant and task is resolved.
"""

from __future__ import annotations

from analysis.report import fmt

TITLE = "What would resolve it"
HEADER = ["variant", "option", "runs", "cost", "half-width after", "P(resolve)", "edit"]


def _unresolved(found: dict) -> list[tuple[str, dict]]:
    """(label, entry) of each unresolved variant, then each unresolved (task, variant)."""
    out = list(found["variants"].items())
    for task, rows in (found.get("tasks") or {}).items():
        out += [(f"{variant} on {task}", v) for variant, v in rows.items()]
    return out


def _rows(found: dict) -> list[list[str]]:
    rows = []
    for variant, v in _unresolved(found):
        for o in v["options"]:
            rows.append(
                [
                    variant,
                    o["kind"].replace("_", " "),
                    str(o["num_runs"]),
                    f"{fmt.num(o['cost'], sig=3)} {found['unit']}",
                    f"\u00b1{fmt.num(o['half_width_pct'], sig=2)}%",
                    f"{o['p_resolve']:.2f}",
                    o["edit"] + (f" ({o['note']})" if o.get("note") else ""),
                ]
            )
    return rows


def resolve_blocks(verdict: dict) -> list[tuple]:
    found = verdict.get("resolve")
    if not found:
        return []
    b: list[tuple] = [("h", TITLE)]
    for variant, v in found["variants"].items():
        b.append(
            (
                "p",
                f"{variant} is {v['word']} at {v['size']}: gain "
                f"{fmt.num(v['estimate_pct'], sig=2)}% \u00b1{fmt.num(v['half_width_pct'], sig=2)}%"
                f" ({v['num_seeds']} paired seeds, seeds' sd {fmt.num(v['seeds_sd_pct'], sig=2)}%,"
                f" the LR grid's sd {fmt.num(v['grid_sd_pct'], sig=2)}%)."
                + (
                    " First, as its verdict says: " + fmt.words(v["first"])
                    if v.get("first")
                    else ""
                ),
            )
        )
    for task, rows in (found.get("tasks") or {}).items():
        for variant, v in rows.items():
            b.append(("p", _task_words(task, variant, v)))
    b.append(("table", HEADER, _rows(found)))
    b.append(
        (
            "p",
            f"Priced at the level the first extension would be judged at "
            f"({fmt.num(found['level'], sig=2)}: alpha spent over {found['max_looks']} "
            "extensions declared before the first); best probability per "
            f"{found['unit']} first. A resolve run buys them round by round within a declared "
            "budget, each round a look at its spent level."
            + (
                " A task's rows are priced at its own test level (above); a resolve run buys "
                "for the loss's verdict only, and the seeds it buys are scored on the tasks too."
                if found.get("tasks")
                else ""
            ),
        )
    )
    return b


def resolve_lines(verdict: dict) -> list[str]:
    """The terminal's lines after the verdict: each unresolved variant's best option."""
    found = verdict.get("resolve")
    if not found:
        return []
    lines = []
    for variant, v in _unresolved(found):
        if v["options"]:
            o = v["options"][0]
            lines.append(
                f"to resolve {variant}: {o['edit']}: {fmt.num(o['cost'], sig=3)} {found['unit']}, "
                f"P(resolve) {o['p_resolve']:.2f} ({len(v['options'])} options in the report)"
            )
    return lines


def _task_words(task: str, variant: str, v: dict) -> str:
    return (
        f"{variant} on the task {task} is {v['word']} at {v['size']}: gain "
        f"{fmt.num(v['estimate_pct'], sig=2)}% \u00b1{fmt.num(v['half_width_pct'], sig=2)}% in "
        f"bits per byte (positive: fewer bits; {v['num_seeds']} paired seeds, seeds' sd "
        f"{fmt.num(v['seeds_sd_pct'], sig=2)}%, tested at {fmt.num(v['level'], sig=2)}, its Holm "
        "level's top-size share). More paired seeds at the top narrow it; the LR is chosen on "
        "the loss, never on a task."
    )
