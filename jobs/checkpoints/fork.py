"""Starting a run from another run's kept checkpoint: a WSD cooldown branch.

A branch is, step for step, the independent WSD run to its budget: the parent (schedule
`constant`) trained exactly the steps the independent run would have trained before its decay,
on the same batches (same data seed and `train.dataset_steps`), so loading the parent's model,
optimiser, RNG and loss history at the branch point and continuing gives the same numbers
(bitwise on CPU). What could break that is checked here, before anything is trained: the
checkpoint must exist, and the parent must have trained the same model on the same data with
the same optimiser and layout.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from foundation import contract as C
from foundation.config import load_file, to_dict
from jobs.checkpoints import checkpoint as ckpt
from jobs.config import RunConfig

__all__ = ["load_parent_checkpoint", "parent_run_id", "check_parent_config"]

# Run-config fields a branch must share with its parent (dotted); the rest may differ.
_SHARED = (
    "seed",
    "model",
    "data",
    "optimizer",
    "parallel",
    "engine",
    "precision",
    "train.global_batch_tokens",
    "schedule.warmup_steps",
)


def _get(data: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        data = data.get(part) if isinstance(data, dict) else None
    return data


def check_parent_config(config: RunConfig) -> None:
    """Raise ValueError if the parent's recorded run config differs where a branch must match.

    The parent's `run_config.yaml` (written by `scaling submit`, or its end-of-run artifact) is
    compared when present; a parent run by hand without one is trusted.
    """

    assert config.init_from is not None
    parent_dir = Path(config.init_from.output_dir)
    for candidate in (parent_dir / "run_config.yaml", parent_dir / "artifacts" / "run_config.yaml"):
        if candidate.is_file():
            parent = load_file(candidate)
            break
    else:
        return
    mine = to_dict(config)
    mine["train"]["dataset_steps"] = config.train.num_dataset_steps
    parent_train = parent.get("train", {})
    parent_horizon = parent_train.get("dataset_steps") or parent_train.get("steps")
    differs = [f for f in _SHARED if _get(mine, f) != _get(parent, f)]
    if parent_horizon != config.train.num_dataset_steps:
        differs.append("train.dataset_steps")
    if differs:
        raise ValueError(
            f"init_from: the parent run in {parent_dir} trained with different {', '.join(differs)}"
            "; a branch continues its parent's run, so these must be equal (rebuild the branch "
            "from the same study, or start it afresh without init_from)"
        )


def _parent_outcome(parent_dir: Path) -> str:
    """What the parent's result says, to explain a missing branch-point checkpoint."""
    result = parent_dir / "result.json"
    if not result.is_file():
        return "has not finished (no result.json)"
    data = json.loads(result.read_text())
    return f"ended {data.get('status')} at step {data.get('steps')}"


def load_parent_checkpoint(config: RunConfig, layout: dict[str, int]) -> dict[str, Any]:
    """Collective: this rank's payload of the parent's checkpoint at `init_from.step`."""
    assert config.init_from is not None
    parent_dir = Path(config.init_from.output_dir)
    step = config.init_from.step
    path = ckpt.step_dir(parent_dir / "checkpoints", step)
    if not (path / "complete.json").is_file():
        raise FileNotFoundError(
            f"init_from: the parent run in {parent_dir} has no checkpoint at step {step} "
            f"({path}); the parent {_parent_outcome(parent_dir)}. Rerun the parent (its stable "
            "cell) to its branch points first"
        )
    check_parent_config(config)
    payload = ckpt.load_step(path, layout)
    saved = payload["state"]["step"]
    assert saved == step, f"checkpoint {path} holds step {saved}, not {step}"
    return payload


def parent_run_id(config: RunConfig) -> str | None:
    """The parent's MLflow run id (its output dir's `mlflow_run_id`), if it has one."""
    if config.init_from is None:
        return None
    path = Path(config.init_from.output_dir) / C.RUN_ID_FILE
    return path.read_text().strip() if path.is_file() else None
