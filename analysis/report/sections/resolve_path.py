"""The report's "The resolve path" section: what `scaling run --resolve` bought, look by look.

Read from verdict.json's ``resolve_path`` (the study's ``resolve.json`` path, as
``analysis.stats.resolve.loop.Path.as_dict`` has it, each extension's option beside its look):
each look's level and words, what the extension before it bought, why, its predicted
P(resolve) and cost; then how the path ended and what it spent of the declared budget. Absent
when the study ran no resolve.
"""

from __future__ import annotations

from analysis.report import fmt

TITLE = "The resolve path"
HEADER = ["look", "level", "bought before it", "runs", "cost", "P(resolve)", "why", "words"]
STOPPED = {
    "resolved": "every variant resolved",
    "budget": "no option fitted in what was left of the budget",
    "no option": "no option was left to buy",
    "looks": "the declared extensions were spent",
}


def _rows(path: dict) -> list[list[str]]:
    rows = []
    for look in path["looks"]:
        b = look.get("bought") or {}
        p = b.get("p_resolve")
        rows.append(
            [
                str(look["look"]),
                fmt.num(look["level"], sig=2),
                (b.get("kind") or "").replace("_", " ") or "(the study as it stood)",
                str(b.get("num_runs", "")),
                f"{b['cost']:.3g}" if "cost" in b else "",
                "" if p is None else f"{p:.2f}",
                b.get("why", ""),
                ", ".join(f"{v} {w}" for v, w in look["words"].items()),
            ]
        )
    return rows


def resolve_path_blocks(verdict: dict) -> list[tuple]:
    path = verdict.get("resolve_path")
    if not path:
        return []
    words = ", ".join(f"{v} {w}" for v, w in path["words"].items()) or "no variant read"
    return [
        ("h", TITLE),
        (
            "p",
            f"Declared before the first extension: at most {path['max_looks']} extensions within "
            f"{fmt.num(path['budget'], sig=3)} device-hours, alpha {fmt.num(path['alpha'], sig=2)}"
            " spent over the looks at fixed fractions (each look's level is its increment, so "
            "the family-wise error of the whole path stays within alpha).",
        ),
        ("table", HEADER, _rows(path)),
        (
            "p",
            f"Ended: {STOPPED.get(path['stopped'], path['stopped'])}, after "
            f"{len(path['looks']) - 1} extension(s) and {path['spent']:.3g} "
            f"device-hours. Final words: {words} (a variant resolved at a look keeps that "
            "look's word).",
        ),
    ]
