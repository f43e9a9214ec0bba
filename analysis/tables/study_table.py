"""A study's run table, assembled in one place: the LR search, every look and `status` (through
``scaling.lr_search.extend_grid.scan_table``) and the report
(``analysis.tables.mlflow_io.load_study_runs``)
build their rows with ``run_record`` and their states with ``run_state``, so none of them can drop
a column the verdict reads (``flops_counted``: the FLOPs guard of a variant that declared none;
``code_digest``: the model code each run trained, of which a verdict judges one per variant)
or name a run's state differently.
"""

from __future__ import annotations

import math

import pandas as pd

from analysis.tables.runs import is_eval_column, normalise
from foundation import contract

# every column of a study's run table, in order; `run_record` needs each one
STUDY_COLUMNS = (
    "variant", "size", "num_nonembedding_params", "num_params_total", "tokens", "flops",
    "flops_counted", "code_digest", "seed", "lr", "final_val_loss", "select_val_loss", "status",
    "run_id",
)  # fmt: skip


def run_state(status: str, outcome: str | None, has_final_loss: bool) -> str:
    """The one run -> state mapping: MLflow's run status by the contract (FAILED -> failed,
    KILLED -> cancelled, RUNNING/SCHEDULED -> running); a FINISHED run's is its outcome tag, and
    one that finished without its final loss, or whose tag still says it runs, failed."""
    mapped = contract.run_status_state(status)
    if mapped is not None:
        return mapped
    if outcome in (contract.DIVERGED, contract.FAILED, contract.CANCELLED):
        return outcome
    if outcome in (contract.RUNNING, contract.PENDING, contract.QUEUED) or not has_final_loss:
        return contract.FAILED
    return contract.COMPLETED


def effective_digest(code_digest: str | None, code_accepted: str | None) -> str:
    """The code a run's result stands for: the digest it was accepted for (`--accept-stale`,
    tag ``scaling.code_accepted``) if any, else the one it trained with; "" if not recorded."""
    return code_accepted or code_digest or ""


def run_record(**fields) -> dict:
    """One row of the table: every column of ``STUDY_COLUMNS`` given (None / NaN where not
    known), and nothing else; a builder that leaves one out fails here, not in the verdict."""
    missing = [c for c in STUDY_COLUMNS if c not in fields]
    extra = [c for c in fields if c not in STUDY_COLUMNS and not is_eval_column(c)]
    if missing or extra:
        raise TypeError(f"run_record: missing {missing}, unknown {extra}")
    out = {c: fields[c] for c in STUDY_COLUMNS}
    out.update((c, v) for c, v in fields.items() if is_eval_column(c))  # downstream tasks
    for c in ("num_params_total", "flops", "lr", "final_val_loss", "select_val_loss"):
        out[c] = math.nan if out[c] is None else out[c]
    out["flops_counted"] = out["flops_counted"] or ""
    out["code_digest"] = out["code_digest"] or ""  # "": not recorded (`analysis.tables.digests`)
    return out


def run_table(records: list[dict], source: str) -> pd.DataFrame:
    """The normalised run table (``analysis.tables.runs.normalise``) of ``run_record`` rows."""
    evals = sorted({c for record in records for c in record if is_eval_column(c)})
    frame = pd.DataFrame.from_records(records, columns=[*STUDY_COLUMNS, *evals])
    return normalise(frame, source)
