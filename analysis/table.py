"""The tidy run table every analysis starts from: one row per run, from MLflow or from a CSV.

Columns (docs/interfaces.md): ``variant, size, n_params, n_params_total, tokens, flops, seed,
lr, final_val_loss, status`` plus ``run_id``. ``n_params`` is the non-embedding count N used in
the fits (Kaplan et al. 2020 fit non-embedding N); ``n_params_total`` includes embeddings.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

COLUMNS = [
    "variant",
    "size",
    "n_params",
    "n_params_total",
    "tokens",
    "flops",
    "seed",
    "lr",
    "final_val_loss",
    "status",
    "run_id",
]
REQUIRED_CSV = ["variant", "n_params", "tokens", "seed", "final_val_loss"]
STATUSES = ("completed", "diverged", "failed", "running")
_NUMERIC = ["n_params", "n_params_total", "tokens", "flops", "lr", "final_val_loss"]


def size_label(n_params: float) -> str:
    """``12_345_678 -> "12.3M"``: a readable size when the table does not name one."""
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n_params >= scale:
            return f"{n_params / scale:.3g}{unit}"
    return f"{n_params:.3g}"


def approx_flops(n_params: pd.Series, tokens: pd.Series) -> pd.Series:
    """C ~ 6 N D (Kaplan et al. 2020: forward + backward, attention ignored)."""
    return 6.0 * n_params * tokens


def normalise(table: pd.DataFrame, source: str) -> pd.DataFrame:
    """Check types and values, fill optional columns; errors name ``source`` and the column."""
    missing = [c for c in REQUIRED_CSV if c not in table.columns]
    if missing:
        raise ValueError(
            f"{source}: missing required column(s) {', '.join(missing)}; "
            f"a run table needs {', '.join(REQUIRED_CSV)} (optional: flops, lr, size, status)"
        )
    out = table.copy()
    for col in _NUMERIC:
        if col not in out.columns:
            out[col] = np.nan
        values = pd.to_numeric(out[col], errors="coerce")
        bad = values.isna() & out[col].notna()
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise ValueError(
                f"{source}: column {col!r} row {row + 1} is {out[col].iloc[row]!r}, not a number"
            )
        out[col] = values.astype(float)
    for col in ("n_params", "tokens"):
        if out[col].isna().any() or (out[col] <= 0).any():
            raise ValueError(f"{source}: column {col!r} must be a positive number in every row")
    seeds = pd.to_numeric(out["seed"], errors="coerce")
    if seeds.isna().any() or (seeds != seeds.round()).any():
        raise ValueError(f"{source}: column 'seed' must hold integers in every row")
    out["seed"] = seeds.astype(int)
    out["variant"] = out["variant"].astype(str)
    if "size" not in out.columns or out["size"].isna().all():
        out["size"] = out["n_params"].map(size_label)
    out["size"] = out["size"].astype(str)
    if "status" not in out.columns:
        out["status"] = "completed"
    out["status"] = out["status"].fillna("completed").astype(str).str.lower()
    unknown = sorted(set(out["status"]) - set(STATUSES))
    if unknown:
        raise ValueError(
            f"{source}: column 'status' has {', '.join(unknown)}; use one of {', '.join(STATUSES)}"
        )
    out["flops_estimated"] = out["flops"].isna()
    out["flops"] = out["flops"].fillna(approx_flops(out["n_params"], out["tokens"]))
    if "n_params_total" not in table.columns:
        out["n_params_total"] = np.nan
    if "run_id" not in out.columns:
        out["run_id"] = [f"row{i + 1}" for i in range(len(out))]
    out["run_id"] = out["run_id"].astype(str)
    return out[COLUMNS + ["flops_estimated"]].reset_index(drop=True)


def load_csv(path: str | Path) -> pd.DataFrame:
    """Read a run table from a CSV (required: variant, n_params, tokens, seed, final_val_loss)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--runs-csv {path}: no such file; pass a CSV with one row per run")
    try:
        table = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise ValueError(f"--runs-csv {path}: not a readable CSV ({err})") from err
    return normalise(table, f"--runs-csv {path}")


def split_usable(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs the fits may use, runs excluded with a ``reason``): only completed, finite losses.

    A diverged, failed or still-running run says nothing about the converged loss at its size,
    so it is listed in the report rather than silently averaged in or dropped.
    """
    finite = np.isfinite(table["final_val_loss"]) & (table["final_val_loss"] > 0)
    ok = (table["status"] == "completed") & finite
    excluded = table[~ok].copy()
    excluded["reason"] = np.where(
        excluded["status"] != "completed",
        excluded["status"],
        "non-finite or non-positive final_val_loss",
    )
    return table[ok].reset_index(drop=True), excluded.reset_index(drop=True)
