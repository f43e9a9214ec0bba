"""The report's line on the model code it judged: each variant's code digest and run count,
from verdict.json's ``code_digests`` (``analysis.tables.digests``)."""

from __future__ import annotations

from analysis.tables.digests import UNRECORDED


def code_note(verdict: dict) -> str | None:
    """ "Model code judged: linear 3f2a… (12 runs); ..." or None (a verdict without the field)."""
    digests = verdict.get("code_digests")
    if not digests:
        return None
    parts = []
    for variant, judged in digests.items():
        shown = ", ".join(
            f"{'not recorded' if d == UNRECORDED else f'`{d}`'} ({n} run{'s' * (n != 1)})"
            for d, n in judged["digests"].items()
        )
        parts.append(f"{variant} {shown or 'no run with a result'}")
    return "Model code judged (code digest per variant, one each): " + "; ".join(parts) + "."
