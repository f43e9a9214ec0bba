"""The report's "Sequential looks" section and the terminal's look clause.

Present only when verdict.json has a ``sequential`` part (``analysis.run_analysis`` with a
judgement that holds looks.json): one row per look, the design, the level the claims were read
at and why (alpha spending), where each look added seeds, and whether the design has finished.
"""

from __future__ import annotations

import re

from analysis.report import fmt

# decide_look's reasons open with "look k (t = 0.50, 5 paired seeds at the top, level 0.0054): "
_AT = re.compile(r"^look \d+ \([^)]*\): ")


def _badge(outcome: str) -> str:
    return f"[[{outcome}|{outcome}]]"


def level_text(level: float) -> str:
    """A nominal level as a number, two significant digits: 0.0054, 0.00035, 0.035."""
    return fmt.num(float(level), sig=2)


def why(look: dict) -> str:
    """The look's reason without its opening (look, t, seeds and level are columns)."""
    return fmt.words(_AT.sub("", str(look["reason"])))


def added_text(add_seeds: dict) -> str:
    return ", ".join(f"+{k} at {size}" for size, k in add_seeds.items())


def _verdict_cell(look: dict) -> str:
    verdicts = look.get("verdicts") or {}
    if len(verdicts) == 1:
        return _badge(next(iter(verdicts.values())))
    if verdicts:
        return "; ".join(f"{name}: {_badge(word)}" for name, word in verdicts.items())
    return str(look["verdict"])


def look_clause(verdict: dict) -> str | None:
    """``"look 2 of at most 5, level 0.0054"`` (and that the design has not finished when the
    last look did not stop); None without sequential looks."""
    seq = verdict.get("sequential")
    if not seq:
        return None
    at = seq["judged_at"]
    text = f"look {at['look']} of at most {seq['num_looks_max']}, level {level_text(at['level'])}"
    return text if seq["finished"] else text + "; the design has not finished"


def look_note(verdict: dict) -> str | None:
    """The one line under the headline that says the verdict is a sequential look's."""
    seq = verdict.get("sequential")
    if not seq:
        return None
    at = seq["judged_at"]
    text = (
        f"Sequential seeds: judged as look {at['look']} of at most {seq['num_looks_max']}, at "
        f"its nominal level {level_text(at['level'])} rather than 5% (see Sequential looks)"
    )
    if not seq["finished"]:
        text += "; the design has not finished, so this is not its final decision"
    return text + "."


def look_blocks(verdict: dict) -> list[tuple]:
    """The section "Sequential looks"; empty without them."""
    seq = verdict.get("sequential")
    if not seq:
        return []
    design, looks, at = seq["design"], seq["looks"], seq["judged_at"]
    last = looks[-1]
    b: list[tuple] = [("h", "Sequential looks")]
    planned = ", ".join(str(n) for n in seq["planned_seeds"])
    b.append(
        (
            "p",
            f"Design: `seeds: {{start: {design['start']}, max: {design['max']}, step: "
            f"{design['step']}}}`: {design['start']} seeds at every size, then {design['step']} "
            "more at a time at the sizes where they narrow the deciding interval most per FLOP, "
            f"until the verdict is decided or the top size has {design['max']} paired seeds; at "
            f"most {seq['num_looks_max']} looks, planned at {planned} paired seeds at the top "
            f"(information fraction t = paired seeds at the top / {design['max']}).",
        )
    )
    rows = [
        [
            look["look"],
            look["num_paired_top"],
            fmt.num(float(look["info_fraction"]), 2),
            fmt.num(float(look["z"]), 3),
            level_text(look["level"]),
            _verdict_cell(look),
            "stop" if look["stop"] else "continue",
            why(look),
        ]
        for look in looks
    ]
    header = ["look", "paired seeds at the top", "t", "boundary z", "nominal level"]
    header += ["verdict", "stop / continue", "why"]
    b.append(("table", header, rows))
    alpha = 100 * float(at["alpha"])
    taken = f"{len(looks)} look{'s' if len(looks) > 1 else ''} so far"
    b.append(
        (
            "p",
            f"Every claim in this report, and the intervals that decided it (the verdict "
            f"table's top gain, k0 and γ at the CI level shown there, and the headline's), were "
            f"judged at look {at['look']}'s nominal level {level_text(at['level'])} (boundary "
            f"z = {fmt.num(float(at['z']), 3)}) rather than at 5%: adjusted for the "
            f"{taken} by Lan–DeMets O'Brien–Fleming-type alpha spending (Lan & "
            f"DeMets 1983), so that the chance of any false claim over all the looks the design "
            f"takes (at most {seq['num_looks_max']}) is at most {alpha:.3g}%. Early looks spend "
            "almost none of it. The other intervals (the per-size gains, the fitted laws, the "
            "extrapolations) are 95% intervals as labelled, and no claim was read from them; "
            "the detectable gains under Seed noise are a fixed design's at 5%. See "
            "docs/statistics.md, Sequential seeds.",
        )
    )
    b.append(("p", _added_sentence(looks)))
    if seq["finished"]:
        b.append(
            (
                "p",
                f"The design finished at look {last['look']} of at most "
                f"{seq['num_looks_max']}: {why(last)}.",
            )
        )
    else:
        asked = added_text(last.get("add_seeds") or {}) or "more seeds"
        b.append(
            (
                "note",
                f"The design has not finished: look {last['look']} asked for {asked} and no "
                "later look has judged them (the study was interrupted or is still running). "
                f"This report reads the runs as they stand at look {last['look']}'s level; it "
                "is not the design's final decision.",
            )
        )
    if not seq["matches_last_look"]:
        now = seq.get("num_paired_top_now")
        seeds = f" ({now} paired seeds at the top here, {last['num_paired_top']} at the look)"
        b.append(
            (
                "note",
                f"The verdict here is not look {last['look']}'s ({last['verdict']}): the runs "
                f"analysed here are not the ones that look read{seeds if now is not None else ''}.",
            )
        )
    return b


def _added_sentence(looks: list[dict]) -> str:
    parts = []
    for look in looks:
        add = look.get("add_seeds") or {}
        if add:
            into = f" (round {look['round']})" if look.get("round") is not None else ""
            parts.append(f"after look {look['look']}, {added_text(add)}{into}")
    if not parts:
        return "Seeds added: none; no look asked for more."
    return "Seeds added: " + "; ".join(parts) + "."
