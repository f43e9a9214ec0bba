"""The report's label on a user's own re-analysis of a study (verdict.json's ``reanalysis``:
the settings changed from the study's, `scaling analyze STUDY --margin 0.3 --out DIR`)."""

from __future__ import annotations

TITLE = " (re-analysis by the user, not the study's verdict)"


def reanalysis_note(verdict: dict) -> str | None:
    """The note under the lead, or None (the study's own verdict, or a run table's)."""
    again = verdict.get("reanalysis")
    if again is None:
        return None
    changed = ", ".join(f"`{c}`" for c in again.get("changed", [])) or "the user's settings"
    return (
        f"Re-analysis by the user ({changed}), not the study's verdict: the study's own report "
        "is the one `scaling run` wrote into its folder, which `scaling analyze STUDY` "
        "without these options reproduces."
    )
