"""Which model code a verdict judges: one code digest per variant, never two mixed.

Each run records the digest of the code that built its model (tag ``scaling.code_digest``; a
result kept after a change with ``--accept-stale`` carries the later digest it stands for in
``scaling.code_accepted``); the run table holds the effective one in ``code_digest``
(``study_table.effective_digest``). A variant whose results come from two versions of its code
describes no one model: a verdict on it would average two models as one. So the analysis
refuses such a table, and verdict.json records the digest(s) and run count of each variant it
judged (``code_digests``). Runs without a digest (a CSV, a synthetic study, runs from before
digests were recorded) are ``unrecorded`` and compatible with any digest.
"""

from __future__ import annotations

import pandas as pd

from foundation.config import ConfigError

UNRECORDED = "unrecorded"
JUDGED_STATES = ("completed", "diverged")  # a result: what the verdict and the LR choice read


class MixedCode(ConfigError):
    """A variant's judged runs come from two versions of its code: refused, not inconclusive."""


def judged_digests(table: pd.DataFrame) -> dict[str, dict]:
    """verdict.json's ``code_digests``: per variant, how many runs with a result it judges and
    how many of them carry each digest (``unrecorded``: none recorded). ValueError when a
    variant's runs carry two or more recorded digests (MixedCode, a ValueError), naming them,
    their counts and the fix."""
    digests = table["code_digest"] if "code_digest" in table.columns else ""
    digests = pd.Series(digests, index=table.index).fillna("").astype(str)
    judged = table["status"].isin(JUDGED_STATES)
    out, mixed = {}, []
    for variant in sorted(table["variant"].unique()):
        mine = digests[judged & (table["variant"] == variant)]
        counts = mine.replace("", UNRECORDED).value_counts()
        counts = {str(d): int(n) for d, n in sorted(counts.items())}
        out[variant] = {"digests": counts, "num_runs": int(len(mine))}
        if len(set(counts) - {UNRECORDED}) > 1:
            shown = ", ".join(f"{d} ({n} run(s))" for d, n in counts.items())
            mixed.append(f"variant {variant}: {shown}")
    if mixed:
        raise MixedCode(
            "the runs judged come from different model code (code digests): "
            + "; ".join(mixed)
            + ". A verdict would average two versions of the code as one model; nothing was "
            "judged or written. Rerun the stale cells (`scaling run STUDY --rerun-stale`) or "
            "accept them (`--accept-stale`); `scaling status` marks them stale"
        )
    return out
