"""The runs an analysis leaves out, each with why, and the arms it cannot judge at all.

Nothing is dropped silently: verdict.json's ``excluded_runs`` lists every run not used (its own
state, its LR losing a seed at that size, or a scan-only LR), and ``unjudged`` every arm with no
usable run. ``analysis.stats.analyze`` reads both.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.tables.runs import is_usable

EXCLUDED_COLUMNS = ["run_id", "variant", "size", "seed", "lr", "reason"]
LOST_SEED = "its LR (or cell) lost a seed at this size: not usable, never chosen on survivors"
SCAN_ONLY = "scan-only LR: not every seed ran it at this size (none lost): never chosen"


def excluded_runs(table: pd.DataFrame, kept: pd.DataFrame) -> pd.DataFrame:
    """Every run not used, with why: its own state; its LR losing a seed at that size (some run
    of that LR there is unusable); or a scan-only LR (every run of it there is usable, but not
    every seed ran it: an LR search's scan, `follow_neighbours: 0`)."""
    out = table[~table["run_id"].isin(set(kept["run_id"]))].copy()
    own = ~is_usable(out)
    reason = np.where(
        out["status"] != "completed", out["status"], "non-finite or non-positive final_val_loss"
    )
    keys = [c for c in ("variant", "size", "tokens", "lr") if c in table.columns]
    lr_ok = table.assign(_ok=is_usable(table)).groupby(keys, dropna=False, as_index=False)["_ok"]
    found = out[keys].merge(lr_ok.all(), on=keys, how="left")["_ok"]
    none_lost = found.astype("boolean").fillna(False).to_numpy(dtype=bool)
    out["reason"] = np.where(own, reason, np.where(none_lost, SCAN_ONLY, LOST_SEED))
    return out.reset_index(drop=True)


def why_unusable(excluded: pd.DataFrame, variants: list[str]) -> str:
    """``12 diverged, 3 failed``: the reasons the runs of `variants` were left out, counted."""
    reasons = excluded.loc[excluded["variant"].isin(variants), "reason"].value_counts()
    return ", ".join(f"{n} {reason}" for reason, n in reasons.items()) or "no runs"


def unjudged(
    table: pd.DataFrame, usable: pd.DataFrame, excluded: pd.DataFrame, baselines: list[str]
) -> list[dict]:
    """verdict.json's ``unjudged``: each arm but the baselines with no usable run, and why
    (listed, never silently dropped from the verdict)."""
    dead = sorted(set(table["variant"]) - set(usable["variant"]) - set(baselines))
    return [
        {"variant": v, "reason": f"no usable runs ({why_unusable(excluded, [v])})"} for v in dead
    ]
