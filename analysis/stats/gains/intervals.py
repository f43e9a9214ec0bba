"""Whether a study can carry intervals at all, said once and kept everywhere.

Below ``analysis.stats.gains.levels.MIN_SEEDS`` seeds a spread cannot be estimated well enough for
an interval to mean anything (with 2 seeds a bootstrap's 95% interval is close to the range of
two numbers). Such a study gets no interval, band or p-value anywhere: ``analysis.stats.analyze``
draws
no resamples for it, and ``strip`` clears whatever interval-shaped field is left in the verdict,
so ``verdict.json``, the report, the plots and the terminal agree. The report says why once.
"""

from __future__ import annotations

from analysis.stats.gains.levels import MIN_SEEDS

INTERVAL_KEYS = ("ci", "ci95", "k0_ci95", "gamma_ci95", "paired_ci", "pooled_ci")
P_KEYS = ("top_gain_p", "variant_p", "p")


def enough_seeds(num_seeds: int) -> bool:
    return num_seeds >= MIN_SEEDS


def availability(num_seeds: int, num_resamples: int) -> dict:
    """verdict.json's ``intervals``: ``available`` and, when not, ``why`` in one sentence."""
    if not enough_seeds(num_seeds):
        why = (
            f"this study has {num_seeds} seed(s); an interval needs at least {MIN_SEEDS}, so "
            "no interval, band or p-value is shown"
        )
        return {"available": False, "why": why}
    if num_resamples <= 0:
        return {"available": False, "why": "no bootstrap draws were asked for (--resamples 0)"}
    return {"available": True, "why": None}


def strip(value):
    """A copy of ``value`` (verdict data) with every interval and p-value set to None."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            out[k] = None if k in INTERVAL_KEYS or k in P_KEYS else strip(v)
        return out
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value
