"""The run record: what a cell leaves behind besides its checkpoints.

Tags and params at the start, and at the end the summary metrics (names from
`foundation.contract`), the loss curve as CSV and plot, the resolved run config and
`result.json` (which makes a rerun of a finished cell return at once). The trainer calls
`start` and `finish` on rank 0; everything here goes through the tracker's spool.
A password in the tracking URI is masked in every record (`redacted`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foundation import contract as C
from foundation.atomic import write_text
from foundation.config import dump_file, flatten, to_dict
from foundation.provenance import device_name, git_commit, host_name, versions
from foundation.secrets import redact_uri
from jobs.config import RunConfig
from models.accounting import num_nonembedding_params, num_params
from models.catalog.code_parts import digest_of_parts, format_parts
from models.catalog.variants import code_parts

__all__ = [
    "RunResult",
    "LossHistory",
    "finished_result",
    "start",
    "finish",
    "dataset_input",
    "redacted",
]


@dataclass
class RunResult:
    """What a cell produced. status: completed | diverged | preempted."""

    status: str
    final_val_loss: float
    steps: int
    tokens: int
    run_id: str | None = None
    train_losses: list[float] = field(default_factory=list)
    loop_time_s: float = 0.0  # wall time of the training loop (steps, evals, logging, saves)
    tracking_time_s: float = 0.0  # of which spent in tracker calls (rank 0)
    final_select_loss: float = math.nan  # on the LR-selection windows; NaN without them


@dataclass
class LossHistory:
    """Everything besides model/optimiser a resume needs (the data position is the step)."""

    step: int = 0
    tokens_seen: int = 0
    best_loss: float = math.inf
    losses: list[float] = field(default_factory=list)  # train loss per step: the loss curve
    val_losses: list[list[float]] = field(default_factory=list)  # [step, val loss]
    # the running train loss that spikes are judged on (jobs.loop.spikes)
    loss_ema: float = math.nan
    spike_steps: list[int] = field(default_factory=list)  # steps whose loss spiked


def _result_file(config: RunConfig) -> Path:
    return Path(config.output_dir) / "result.json"


def finished_result(config: RunConfig) -> RunResult | None:
    """The result of a cell that already finished in `config.output_dir`, else None."""
    path = _result_file(config)
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    data["final_val_loss"] = float(data["final_val_loss"])
    data["final_select_loss"] = float(data.get("final_select_loss", math.nan))
    return RunResult(**data)


def write_result(config: RunConfig, result: RunResult) -> None:
    write_text(_result_file(config), json.dumps(result.__dict__, indent=1))


def start(tracker: Any, config: RunConfig, world_size: int, resumed: bool) -> None:
    """Mark the run running with its identity and provenance tags (params on first start)."""
    from models.accounting import flops_counted  # as in finish: models only when a run starts

    parts = code_parts(config.model.query_variant)  # the code digest and what it is made of
    tags = {
        C.TAG_STUDY: config.study,
        C.TAG_CELL_ID: config.name,
        C.TAG_VARIANT: config.model.query_variant,
        C.TAG_SEED: str(config.seed),
        C.TAG_LR: str(config.optimizer.lr),
        **config.tracking.tags,
        C.TAG_ENGINE: config.engine,
        C.TAG_FLOPS_COUNTED: flops_counted(config.model),
        C.TAG_OUTCOME: C.RUNNING,
        C.TAG_CODE_DIGEST: digest_of_parts(parts),
        C.TAG_CODE_FILES: format_parts(parts),
        "git_commit": git_commit(),
        "host": host_name(),
        "device": device_name(),
        "world_size": str(world_size),
        **versions(),
    }
    tracker.set_status("RUNNING")
    tracker.set_tags(tags)
    if not resumed:
        tracker.log_params(flatten(to_dict(redacted(config))))
        tracker.log_dataset(**dataset_input(config.data.path))


def redacted(config: RunConfig) -> RunConfig:
    """The config as it may be recorded: a `user:password@` in the tracking URI masked."""
    uri = config.tracking.tracking_uri
    if redact_uri(uri) == uri:
        return config
    tracking = dataclasses.replace(config.tracking, tracking_uri=redact_uri(uri))
    return config.replace(tracking=tracking)


def dataset_input(data_path: str | Path) -> dict[str, Any]:
    """Name, digest, source and token counts of the prepared dataset a run trains on.

    From the data_prep manifest, so the digest names the token files, not the path: runs in
    two studies on the same tokens show the same dataset in MLflow.
    """
    # lazy: numpy (data_prep.manifest), paid when the run logs its dataset
    from data_prep.manifest import load_manifest

    manifest = load_manifest(data_path)
    profile: dict[str, Any] = {"vocab_size": manifest.vocab_size}
    for split, meta in sorted(manifest["splits"].items()):
        profile[f"num_{split}_tokens"] = int(meta["tokens"])
        profile[f"num_{split}_documents"] = int(meta["documents"])
    source = Path(data_path).resolve()
    return {
        "name": source.name,
        "digest": manifest.digest,
        "source": str(source),
        "profile": profile,
    }


def _plot_losses(history: LossHistory, path: Path, title: str) -> Path:
    """Train and validation loss against step, for the MLflow run page."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(range(1, len(history.losses) + 1), history.losses, label="train", lw=1)
    if history.val_losses:
        steps, values = zip(*history.val_losses, strict=True)
        ax.plot(steps, values, "o-", label="validation")
    ax.set(xlabel="step", ylabel="loss", title=title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _write_curve(history: LossHistory, path: Path) -> Path:
    lines = ["step,train_loss,val_loss"]
    val = {int(s): v for s, v in history.val_losses}
    for i, loss in enumerate(history.losses, start=1):
        lines.append(f"{i},{loss!r},{val.get(i, '')}")
    write_text(path, "\n".join(lines) + "\n")
    return path


def finish(
    tracker: Any, config: RunConfig, result: RunResult, history: LossHistory, flops_per_token: int
) -> None:
    """Summary metrics, artifacts (config, curve CSV and plot), outcome tag, FINISHED, and the
    spool's seal."""

    summary = {
        C.NUM_PARAMS_TOTAL: num_params(config.model),
        C.NUM_NONEMBEDDING_PARAMS: num_nonembedding_params(config.model),
        C.TOKENS: history.tokens_seen,
        C.FLOPS: flops_per_token * history.tokens_seen,
    }
    if result.status == C.COMPLETED:
        summary[C.FINAL_VAL_LOSS] = result.final_val_loss
        if math.isfinite(result.final_select_loss):  # only with an LR-selection set
            summary[C.FINAL_SELECT_LOSS] = result.final_select_loss
    tracker.log_metrics(summary, step=history.step)
    artifacts = Path(config.output_dir) / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    dump_file(redacted(config), artifacts / "run_config.yaml")
    tracker.log_artifact(artifacts / "run_config.yaml")
    tracker.log_artifact(_write_curve(history, artifacts / "loss_curve.csv"))
    tracker.log_artifact(_plot_losses(history, artifacts / "loss_curve.png", config.name))
    tracker.set_tags({C.TAG_OUTCOME: result.status})
    tracker.set_status("FINISHED")
    tracker.seal()  # the spool is whole: a replay into a new run checks this
