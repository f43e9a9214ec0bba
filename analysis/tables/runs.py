"""The tidy run table every analysis starts from: one row per run, from MLflow or from a CSV.

Columns (docs/interfaces.md, "Agreed for the trust round"): ``variant, size,
num_nonembedding_params, num_params_total, tokens, flops, seed, lr, final_val_loss,
select_val_loss, status, run_id``. ``num_nonembedding_params`` is the N of every fit (Kaplan et
al. 2020 fit non-embedding N); ``num_params_total`` includes embeddings. Tables written before
the rename (``n_params``, ``n_nonembedding_params``, ``n_params_total``) are still read. A CSV's
optional ``tokens_per_s`` column (each run's measured throughput) is not a column of the table:
``analysis.tables.csv_times.load_csv_runs`` reads it into the per-run times the gain at matched
GPU-hours rests on, as the MLflow path reads each run's logged ``tokens_per_s``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from foundation import contract

COLUMNS = [
    "variant",
    "size",
    "num_nonembedding_params",
    "num_params_total",
    "tokens",
    "flops",
    "seed",
    "lr",
    "final_val_loss",
    "select_val_loss",
    "status",
    "run_id",
]
REQUIRED_CSV = ["variant", "num_nonembedding_params", "tokens", "seed", "final_val_loss"]
# Old name -> new name. In the first tables `n_params` was the non-embedding count.
OLD_NAMES = {
    "n_nonembedding_params": "num_nonembedding_params",
    "n_params": "num_nonembedding_params",
    "n_params_total": "num_params_total",
}
# The one state vocabulary of a cell (docs/interfaces.md); only `completed` runs carry a loss.
STATUSES = ("pending", "queued", "running", "completed", "diverged", "failed", "cancelled")
_NUMERIC = [
    "num_nonembedding_params",
    "num_params_total",
    "tokens",
    "flops",
    "lr",
    "final_val_loss",
    "select_val_loss",
]
# Sizes of one ladder differ by >= 1.5x; arms of one size by <= 1.125x (wider_mlp +12.5%,
# nonlinear +2d per layer). A cut at 1.3x separates the two.
SAME_SIZE_RATIO = 1.3
# a study is a few thousand runs (`scaling.spec.loader.MAX_CELLS` caps one at 10^5); a table far
# over that is a mistake, and the fits' bootstrap would take hours on it
MAX_RUNS = 100_000
# columns that, when given, hold a finite number > 0 on every row (blank: not known)
_POSITIVE_IF_GIVEN = ("num_params_total", "flops", "lr")
NA = "not available"  # a count or number that is missing or not finite


def is_eval_column(name: str) -> bool:
    """A downstream task's measure, ``eval/<task>/<acc|bpb>`` (``foundation.contract``): the
    table carries one column per task and measure that any run logged."""
    parts = str(name).split("/")
    measure = parts[-1] if len(parts) == 3 else ""
    return f"{parts[0]}/" == contract.EVAL_PREFIX and measure in contract.EVAL_MEASURES


def size_label(n_params: float) -> str:
    """``12_345_678 -> "12.3M"``: a readable size when the table does not name one."""
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n_params >= scale:
            return f"{n_params / scale:.3g}{unit}"
    return f"{n_params:.3g}"


def count_label(n) -> str:
    """Parameter / token counts: ``8e5 -> "800K"``, ``1.2e6 -> "1.2M"``, ``7e9 -> "7B"``; NA
    for anything but a finite int or float."""
    if not (isinstance(n, int | float) and math.isfinite(n)):
        return NA
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= scale:
            return f"{n / scale:.3g}{suffix}"
    return f"{n:.3g}"


def derive_sizes(variant: pd.Series, n_params: pd.Series, source: str) -> pd.Series:
    """A size label per row when the table has none, so that arms of one shape pair.

    Arms of one shape differ in N by a few percent (``nonlinear`` adds 2d norm gains per layer,
    ``wider_mlp`` 12.5%), so labelling each N on its own would never pair them. Distinct N are
    sorted and cut wherever the next N is more than ``SAME_SIZE_RATIO`` times the smallest N of
    the current size; each size is labelled by its smallest N (the baseline's, usually).
    """
    values = np.sort(n_params.unique())
    label, start = {}, values[0]
    for n in values:
        if n > SAME_SIZE_RATIO * start:
            start = n
        label[n] = size_label(start)
    sizes = n_params.map(label)
    clash = pd.DataFrame({"v": variant, "size": sizes, "n": n_params}).groupby(["v", "size"])
    bad = clash["n"].nunique()
    if (bad > 1).any():
        v, s = bad[bad > 1].index[0]
        raise ValueError(
            f"{source}: variant {v!r} has several N within {SAME_SIZE_RATIO}x of each other "
            f"(size {s}); add a `size` column that names each run's size"
        )
    return sizes


def approx_flops(n_params: pd.Series, tokens: pd.Series) -> pd.Series:
    """C ~ 6 N D (Kaplan et al. 2020: forward + backward, attention ignored)."""
    return 6.0 * n_params * tokens


def _rename_old(table: pd.DataFrame) -> pd.DataFrame:
    renames = {}
    for old, new in OLD_NAMES.items():
        if old in table.columns and new not in table.columns and new not in renames.values():
            renames[old] = new
    return table.rename(columns=renames)


def numbers(out: pd.DataFrame, col: str, source: str) -> pd.Series:
    values = pd.to_numeric(out[col], errors="coerce")
    blank = out[col].isna() | (out[col].astype(str).str.strip() == "")
    bad = values.isna() & ~blank
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(
            f"{source}: column {col!r} row {row + 1} is {out[col].iloc[row]!r}, not a number"
        )
    return values.astype(float)


def check_positive(out: pd.DataFrame, col: str, source: str, blank_ok: bool) -> None:
    """ValueError naming `col` and the first row that is not a finite number > 0 (`inf` tokens
    would make every fit's objective infinite, a negative LR its logarithm undefined)."""
    values = out[col].to_numpy(dtype=float)
    bad = ~(np.isfinite(values) & (values > 0))
    if blank_ok:
        bad &= ~np.isnan(values)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        want = "a finite positive number, or blank" if blank_ok else "a positive number"
        raise ValueError(
            f"{source}: column {col!r} row {row + 1} must be {want} (every row), not "
            f"{values[row]:g}"
        )


def normalise(table: pd.DataFrame, source: str) -> pd.DataFrame:
    """Check types and values, fill optional columns; errors name ``source``, column and row."""
    table = _rename_old(table)
    missing = [c for c in REQUIRED_CSV if c not in table.columns]
    if missing:
        raise ValueError(
            f"{source}: missing required column(s) {', '.join(missing)}; "
            f"a run table needs {', '.join(REQUIRED_CSV)} (old name n_params accepted; "
            "optional: size, flops, lr, select_val_loss, status, tokens_per_s)"
        )
    if table.empty:  # a header only; or a study whose every run ended before logging its size
        raise ValueError(
            f"{source}: no runs to analyse (no row; a study's runs all failed before logging "
            "their size); `scaling status` shows why, a run table needs one row per run"
        )
    if len(table) > MAX_RUNS:
        raise ValueError(
            f"{source}: {len(table):,} rows, over the {MAX_RUNS:,} runs of the largest study; "
            "pass one study's runs (one row per run)"
        )
    out = table.copy()
    for col in _NUMERIC:
        out[col] = numbers(out, col, source) if col in out.columns else np.nan
    for col in ("num_nonembedding_params", "tokens"):
        check_positive(out, col, source, blank_ok=False)
    for col in _POSITIVE_IF_GIVEN:
        check_positive(out, col, source, blank_ok=True)
    for col in ("final_val_loss", "select_val_loss"):  # non-finite: a run that diverged
        negative = (out[col] <= 0).to_numpy()
        if negative.any():
            row = int(np.flatnonzero(negative)[0])
            raise ValueError(
                f"{source}: column {col!r} row {row + 1} is {out[col].iloc[row]:g}; a loss is "
                "positive (blank or nan for a run without one)"
            )
    seeds = pd.to_numeric(out["seed"], errors="coerce")
    bad = ~np.isfinite(seeds) | (seeds != seeds.round())
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0]) + 1
        raise ValueError(f"{source}: column 'seed' row {row} must hold an integer (every row)")
    out["seed"] = seeds.astype(int)
    out["variant"] = out["variant"].astype(str)
    if "size" not in out.columns or out["size"].isna().all():
        out["size"] = derive_sizes(out["variant"], out["num_nonembedding_params"], source)
    out["size"] = out["size"].astype(str)
    if "status" not in out.columns:
        out["status"] = "completed"
    out["status"] = out["status"].fillna("completed").astype(str).str.lower()
    unknown = sorted(set(out["status"]) - set(STATUSES))
    if unknown:
        row = int(np.flatnonzero(~out["status"].isin(STATUSES).to_numpy())[0]) + 1
        raise ValueError(
            f"{source}: column 'status' row {row} has {unknown[0]!r}; "
            f"use one of {', '.join(STATUSES)}"
        )
    out["flops_estimated"] = out["flops"].isna()
    # how a run's `flops` were counted (a tag of the run record): "weights_only" when its
    # bring-your-own variant declared no FLOPs; blank when not recorded
    counted = out["flops_counted"] if "flops_counted" in out.columns else ""
    out["flops_counted"] = pd.Series(counted, index=out.index).fillna("").astype(str)
    # the model code a run's result stands for (`analysis.tables.digests`); blank when not
    # recorded (a CSV, a synthetic study, a run from before digests)
    digest = out["code_digest"] if "code_digest" in out.columns else ""
    out["code_digest"] = pd.Series(digest, index=out.index).fillna("").astype(str)
    out["flops"] = out["flops"].fillna(approx_flops(out["num_nonembedding_params"], out["tokens"]))
    if "run_id" not in out.columns:
        out["run_id"] = [f"row{i + 1}" for i in range(len(out))]
    out["run_id"] = out["run_id"].astype(str)
    evals = [c for c in out.columns if is_eval_column(c)]  # downstream tasks, where logged
    for col in evals:
        out[col] = numbers(out, col, source)
    extra = ["flops_estimated", "flops_counted", "code_digest"]
    return out[COLUMNS + extra + evals].reset_index(drop=True)


def load_csv(path: str | Path) -> pd.DataFrame:
    """Read a run table from a CSV (required: variant, num_nonembedding_params or n_params,
    tokens, seed, final_val_loss)."""
    return csv_table(*read_csv(path))


def read_csv(path: str | Path) -> tuple[pd.DataFrame, str]:
    """The CSV's rows as read, and the name its errors give it (``--runs-csv PATH``)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--runs-csv {path}: no such file; pass a CSV with one row per run")
    try:
        table = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise ValueError(f"--runs-csv {path}: not a readable CSV ({err})") from err
    return table, f"--runs-csv {path}"


def csv_table(raw: pd.DataFrame, source: str) -> pd.DataFrame:
    """The run table of a CSV's rows: normalised, each run once; rows keep their order."""
    out = normalise(raw, source)
    _check_repeats(out, source)
    return out


# the columns that name one run of a study: a second row with the same is the same run again
_RUN_KEY = ["variant", "size", "tokens", "seed", "lr"]


def _check_repeats(table: pd.DataFrame, source: str) -> None:
    """ValueError naming the first two rows that are the same run (the same run id, or the same
    variant, size, tokens, seed and LR): counted twice, a run would weigh double in every fit."""
    for key in (["run_id"], _RUN_KEY):
        names = list(zip(*(map(str, table[c]) for c in key), strict=True))  # NaN: "nan", equal
        seen: dict[tuple, int] = {}
        for row, name in enumerate(names):
            if name in seen:
                raise ValueError(
                    f"{source}: rows {seen[name] + 1} and {row + 1} are the same run (same "
                    f"{', '.join(key)}); keep each run once"
                )
            seen[name] = row


def is_usable(table: pd.DataFrame) -> pd.Series:
    """Completed with a finite, positive loss: the only runs that say anything about a loss."""
    loss = table["final_val_loss"]
    return (table["status"] == "completed") & np.isfinite(loss) & (loss > 0)


def split_usable(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs the fits may use, runs excluded with a ``reason``): only completed, finite losses.

    A diverged, failed or still-running run says nothing about the converged loss at its size,
    so it is listed in the report rather than silently averaged in or dropped.
    """
    ok = is_usable(table)
    excluded = table[~ok].copy()
    excluded["reason"] = np.where(
        excluded["status"] != "completed",
        excluded["status"],
        "non-finite or non-positive final_val_loss",
    )
    return table[ok].reset_index(drop=True), excluded.reset_index(drop=True)
