"""Guards a conditional verdict lifts: an LR not bracketed, FLOPs a variant did not declare.

A run table whose arms' best LRs are not bracketed (one LR per arm from a fixed recipe, or a
best LR at the edge of its grid) cannot support a claim: the untuned arm may manufacture or
hide a gain. Nor can a variant whose FLOPs per token are unknown (``analysis.stats.gains.matched``).
The verdict stays ``inconclusive``; beside it, the *conditional* verdict applies the same rule with
those guards lifted: what the data say if each arm's LR was in fact its best (or the variant's
weights were all its FLOPs). It is a statement under a stated assumption, never the verdict.
"""

from __future__ import annotations

import pandas as pd

from analysis.stats.gains.compare import Comparison
from analysis.stats.lr.frontier import LRFrontier, unbracketed_summary
from analysis.stats.rules import verdict as rules
from analysis.stats.rules.evidence import Evidence
from analysis.tables.judgement import Judgement


def lr_guards(comparison: Comparison, info: pd.DataFrame, frontier: dict) -> list[str]:
    """One sentence naming, once each, the compared cells whose best LR is not bracketed."""
    cells: list[LRFrontier] = []
    for b in comparison.curve:
        for g in (b.base, b.var):
            key = (info.at[g, "variant"], info.at[g, "size"], float(info.at[g, "tokens"]))
            if key in frontier:
                cells.append(frontier[key])
    summary = unbracketed_summary(cells)
    return [summary] if summary else []


def conditional(evidence: Evidence, level: float | None, judgement: Judgement) -> dict | None:
    """The decision with the held guards lifted (``verdict`` and ``reason``), or None when
    another guard would still leave it inconclusive (then the condition changes nothing)."""
    if evidence.guards:
        return None
    decision = rules.apply_rule(evidence.lifted(), level, judgement)
    if decision["verdict"] == "inconclusive":
        return None
    return {"verdict": decision["verdict"], "reason": decision["reason"]}


LR_ASSUMED = "each arm's LR was its best"
FLOPS_ASSUMED = "its weights were all its FLOPs"


def assumption(lr_guard: list[str], flops_guard: list[str]) -> str:
    """What the conditional verdict assumes: the guards it lifts, in words."""
    return " and ".join(a for a, g in ((LR_ASSUMED, lr_guard), (FLOPS_ASSUMED, flops_guard)) if g)


def with_conditional(reason: str, cond: dict | None, assumed: str = LR_ASSUMED) -> str:
    if cond is None:
        return reason
    return f"{reason}; if {assumed}: {cond['verdict']} ({cond['reason']})"


def decide_held(evidence: Evidence, level: float | None, judgement: Judgement) -> dict:
    """``analysis.stats.rules.verdict.apply_rule`` on every guard, plus ``conditional_verdict`` and
    ``conditional_assumes`` (None unless a held guard alone kept it from a claim); the
    conditional verdict and its clauses close the reason. ``evidence.law``: the backtest's top
    step (rule 9), for the verdict and the conditional verdict alike."""
    decision = rules.apply_rule(evidence, level, judgement)
    cond = None
    if evidence.held:
        cond = conditional(evidence, level, judgement)
    assumed = assumption(list(evidence.lr_guard), list(evidence.flops_guard))
    decision["reason"] = with_conditional(decision["reason"], cond, assumed)
    decision["conditional_verdict"] = cond and cond["verdict"]
    decision["conditional_assumes"] = cond and assumed
    return decision
