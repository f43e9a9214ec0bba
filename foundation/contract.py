"""The MLflow run contract: the names jobs write and scaling and analysis read, in one place.

- Experiments are created only by `ensure_experiment`, with one rule for where artifacts go
  (beside a SQLite store; the server's default otherwise), whoever creates them first.
- A cell is in exactly one of `STATES`; MLflow's own run status (FINISHED, KILLED, ...) is
  translated by `run_status_state`, for `scaling` and `analysis` alike, and the scheduler's
  (PENDING, RUNNING, ...) by `scaling`; neither is shown raw.
- Summary metrics are `num_params_total` and `num_nonembedding_params`; runs written before the
  rename carry `n_params` / `n_nonembedding_params`, which `summary_metric` still reads.
- A size label is a number with K, M or B (``"124M"``); `size_key` sorts labels by value.

Heavy imports (mlflow) happen inside the functions.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from foundation.sqlite_store import store_lock

__all__ = [
    "STATES",
    "ACTIVE_STATES",
    "DONE_STATES",
    "ENDED_STATES",
    "RUN_STATUS_STATES",
    "run_status_state",
    "make_client",
    "ensure_experiment",
    "experiment_id",
    "search_runs",
    "summary_metric",
    "parse_size",
    "size_key",
]

# --- cell states: the one vocabulary of `scaling status`, tags and the analysis table -------
PENDING = "pending"  # known to the study, not submitted yet
QUEUED = "queued"  # submitted, waiting for resources
RUNNING = "running"
COMPLETED = "completed"
DIVERGED = "diverged"
FAILED = "failed"  # crashed, or its job died without a result
CANCELLED = "cancelled"  # stopped by `scaling cancel`
STALE = "stale"  # a result of code that has changed since (TAG_CODE_DIGEST); shown by status
STATES = (PENDING, QUEUED, RUNNING, COMPLETED, DIVERGED, FAILED, CANCELLED, STALE)
ACTIVE_STATES = (QUEUED, RUNNING)  # a job exists and may still change the cell
DONE_STATES = (COMPLETED, DIVERGED)  # a result: never resubmitted
ENDED_STATES = (COMPLETED, DIVERGED, FAILED, CANCELLED)

# MLflow's run status -> the cell's state. A FINISHED run's state is its job's `outcome` tag
# (completed or diverged), so it maps to None here. KILLED is `scaling cancel` or Ctrl-C ending
# the run from outside: the job was stopped, not broken, hence cancelled rather than failed.
RUN_STATUS_STATES: dict[str, str | None] = {
    "SCHEDULED": RUNNING,  # the run exists and nothing has ended it yet
    "RUNNING": RUNNING,
    "FINISHED": None,
    "FAILED": FAILED,  # the job raised (or its trainer reported a crash)
    "KILLED": CANCELLED,
}


def run_status_state(status: str) -> str | None:
    """The cell state of MLflow run status `status` (`RUN_STATUS_STATES`); None for FINISHED,
    whose state the job's `outcome` tag gives."""
    try:
        return RUN_STATUS_STATES[status]
    except KeyError:
        raise ValueError(
            f"MLflow run status {status!r} is not one of {', '.join(RUN_STATUS_STATES)}"
        ) from None


# --- tags -----------------------------------------------------------------------------------
TAG_STUDY = "study"
TAG_CELL_ID = "cell_id"
TAG_VARIANT = "variant"
TAG_SIZE = "size"
TAG_SEED = "seed"
TAG_LR = "lr"
TAG_ENGINE = "engine"
TAG_FLOPS_COUNTED = "flops_counted"  # exact | declared | weights_only (models.accounting)
TAG_OUTCOME = "outcome"  # running | completed | diverged, written by the job
TAG_ROLE = "scaling.role"  # "study" on the study's parent run
TAG_CONFIG_HASH = "scaling.config_hash"
TAG_CODE_DIGEST = "scaling.code_digest"  # the model code the run trained with (job, at start)
TAG_CODE_ACCEPTED = "scaling.code_accepted"  # a later code digest its result was accepted for
TAG_CODE_FILES = "scaling.code_files"  # its parts, `module=digest ...`: status names what changed
TAG_PARENT = "mlflow.parentRunId"
TAG_ERROR = "error"
TAG_DIVERGENCE = "divergence_reason"
TAG_ROUND = "round"  # LR-search round that created the cell; 0 = the starting grid
TAG_CELL_KIND = "scaling.cell_kind"  # KIND_* below
TAG_PARENT_CELL = "parent_cell"  # a branch's stable-run cell id
TAG_BRANCH_TOKENS = "branch_tokens"  # a branch's token budget D
TAG_BRANCH_STEP = "branch_step"  # the parent's step the branch resumes from
TAG_PARENT_CELL_RUN = "parent_cell_run_id"  # a branch's stable-run MLflow run id
KIND_RUN = "run"  # an ordinary cell: one schedule to its own budget
KIND_STABLE = "stable"  # a WSD run's warmup + stable phase; not a measurement, analysis skips it
KIND_BRANCH = "branch"  # a cooldown forked from a stable run's checkpoint; one budget each
ROLE_STUDY = "study"
RUN_ID_FILE = "mlflow_run_id"  # OUTPUT/<this>: the cell's run id, shared by submit and job

# --- metrics ----------------------------------------------------------------------------------
TRAIN_LOSS = "train/loss"
TRAIN_SPIKES = "train/spikes"  # loss spikes so far in the run (jobs.loop.spikes), per logged step
TRAIN_SPIKE_STEP = "train/spike_step"  # one value per spike: the step it happened at
VAL_LOSS = "val/loss"
VAL_SELECT = "val/select"  # loss on the LR-selection windows, per eval
FINAL_VAL_LOSS = "final_val_loss"
FINAL_SELECT_LOSS = "final_select_loss"  # on the LR-selection windows
NUM_PARAMS_TOTAL = "num_params_total"
NUM_NONEMBEDDING_PARAMS = "num_nonembedding_params"
TOKENS = "tokens"  # D trained
FLOPS = "flops"  # C = flops_per_token x D
# downstream tasks (jobs/evaluation): eval/<task>/acc and eval/<task>/bpb (correct-answer bits
# per byte, lower is better) on the cell's run
EVAL_PREFIX = "eval/"
EVAL_MEASURES = ("acc", "bpb")


def eval_metric(task: str, measure: str) -> str:
    """The MLflow metric of one downstream task's measure, e.g. ``eval/scaling_local/bpb``."""
    return f"{EVAL_PREFIX}{task}/{measure}"


LEGACY_METRICS = {  # old MLflow metric name → its name now (runs logged before the rename)
    "n_params": NUM_PARAMS_TOTAL,
    "n_nonembedding_params": NUM_NONEMBEDDING_PARAMS,
}

# MLflow's default HTTP retries last minutes; commands and jobs must answer in seconds.
_SQLITE = "sqlite:///"


def make_client(uri: str, max_retries: int = 2, timeout_s: int = 20) -> Any:
    """An MlflowClient for `uri` with bounded HTTP retries; a SQLite store's folder is made.

    The first client of a SQLite store in a process is made under the store's lock
    (`foundation.sqlite_store.store_lock`): making it creates (migrates) the schema of a new
    store, which two processes must never do at once.
    """
    from mlflow.tracking import MlflowClient

    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", str(max_retries))
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(timeout_s))
    if not uri.startswith(_SQLITE) or uri == _SQLITE + ":memory:" or uri in _OPENED:
        return MlflowClient(tracking_uri=uri)
    with store_lock(Path(uri[len(_SQLITE) :])):  # makes the folder
        client = MlflowClient(tracking_uri=uri)  # opens the store: creates a new one's schema
        _OPENED.add(uri)
    return client


_OPENED: set[str] = set()  # SQLite stores this process opened (MLflow keeps one per URI)


def artifact_location(uri: str) -> str | None:
    """Where a new experiment keeps artifacts: beside a SQLite store, else the server decides.

    Without this, a SQLite store puts them in `./mlruns` of whichever process came first.
    """
    if uri.startswith(_SQLITE) and uri != _SQLITE + ":memory:":
        return (Path(uri[len(_SQLITE) :]).absolute().parent / "mlartifacts").as_uri()
    return None


def experiment_id(client: Any, name: str) -> str | None:
    """The id of experiment `name`, or None if it does not exist."""
    exp = client.get_experiment_by_name(name)
    return exp.experiment_id if exp is not None else None


# MLflow 3's UI picks its view from this tag: without it an experiment opens on the GenAI
# traces overview ("Traces: 0") instead of the runs table.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"


def ensure_experiment(client: Any, name: str, uri: str) -> str:
    """The id of experiment `name` at `uri`, created if needed: the one place that makes one.

    The experiment declares itself a model-training experiment (`EXPERIMENT_KIND_TAG`); one
    made before that tag existed gets it here.
    """
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        if exp.tags.get(EXPERIMENT_KIND_TAG) != EXPERIMENT_KIND:
            client.set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
        return exp.experiment_id
    try:
        return client.create_experiment(
            name,
            artifact_location=artifact_location(uri),
            tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND},
        )
    except Exception:  # noqa: BLE001 - a concurrent job or submit created it first
        found = experiment_id(client, name)
        if found is None:
            raise
        return found


def search_runs(client: Any, exp_id: str, filter_string: str = "") -> list[Any]:
    """Every run of `exp_id` matching `filter_string`, page by page (no 1000-run cap)."""
    runs, token = [], None
    while True:
        page = client.search_runs(
            [exp_id], filter_string=filter_string, max_results=1000, page_token=token
        )
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def summary_metric(metrics: dict[str, float], name: str) -> float | None:
    """Metric `name` of a run, also under its pre-rename name (`LEGACY_METRICS`)."""
    if name in metrics:
        return float(metrics[name])
    for old, new in LEGACY_METRICS.items():
        if new == name and old in metrics:
            return float(metrics[old])
    return None


# --- size labels ------------------------------------------------------------------------------
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([KMB])$")
_UNIT = {"K": 1e3, "M": 1e6, "B": 1e9}


def parse_size(size: str) -> float:
    """``"1.3B"`` → 1.3e9; raises ValueError for anything but NUMBER followed by K, M or B."""
    match = _SIZE.match(size) if isinstance(size, str) else None
    if not match:
        raise ValueError(
            f"size {size!r} is not a number followed by K, M or B (e.g. '2M', '124M', '1.3B')"
        )
    value = float(match.group(1)) * _UNIT[match.group(2)]
    if value <= 0:
        raise ValueError(f"size {size!r} must be positive")
    return value


def size_label(n: float) -> str:
    """The label of ``n`` weights to 3 significant digits: 174763 -> ``"175K"``, 1.3e9 ->
    ``"1.3B"`` (what `parse_size` reads back)."""
    for unit, scale in (("K", 1e3), ("M", 1e6)):
        value = float(f"{n / scale:.3g}")
        if value < 1000:
            return f"{value:g}{unit}"
    return f"{float(f'{n / 1e9:.3g}'):g}B"


def size_key(size: str) -> tuple[float, str]:
    """Sort key of a size label by its value (``"2M"`` before ``"12M"``); bad labels last."""
    try:
        return (parse_size(size), size)
    except ValueError:
        return (float("inf"), str(size))


# --- where a study writes ---------------------------------------------------------------------
def study_folder(name: str, output_dir: str | None = None) -> Path:
    """A study's folder: its `output_dir`, else ``runs/<name>`` (absolute)."""
    return Path(output_dir) if output_dir else Path("runs", name).absolute()


def analysis_folder(name: str, output_dir: str | None = None) -> Path:
    """Where a study's analysis is written, by `scaling analyze STUDY` and `scaling run` alike."""
    return study_folder(name, output_dir) / "analysis"
