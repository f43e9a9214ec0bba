"""Downstream tasks for one cell: run the harness, turn its samples into the run's metrics.

Per task two numbers go to the cell's MLflow run (names from `foundation.contract`):
`eval/<task>/acc` (the harness's accuracy) and `eval/<task>/bpb`, the correct answer's bits per
byte: -log p(correct continuation | context) / (ln 2 * its UTF-8 bytes), averaged over items.
Accuracy sits near chance at small sizes; bpb keeps ranking models there (OLMo's ladder,
DataDecide), so the verdict reads bpb.

Exactly once: the metrics are written to `<output_dir>/evaluation.json` before they are logged;
a cell that runs again (requeued after its last step, resubmitted) logs that file's numbers and
never evaluates again.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from foundation import contract as C
from foundation.atomic import write_text

__all__ = ["TASKS_DIR", "LOCAL_TASKS", "task_problems", "evaluate", "evaluate_cell"]

TASKS_DIR = Path(__file__).with_name("tasks")
# the project's own tasks: name -> the data file that must exist
LOCAL_TASKS = {"scaling_local": TASKS_DIR / "scaling_local.jsonl"}
RESULT_FILE = "evaluation.json"


def _hub_cached(dataset_path: str) -> bool:
    """Whether a hub dataset (``org/name``) has a folder in the Hugging Face hub cache."""
    from huggingface_hub.constants import HF_HUB_CACHE

    return (Path(HF_HUB_CACHE) / f"datasets--{dataset_path.replace('/', '--')}").is_dir()


def _offline() -> bool:
    return any(os.environ.get(k, "") in ("1", "true", "ON") for k in _OFFLINE_VARS)


_OFFLINE_VARS = ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")


def task_problems(tasks: list[str]) -> list[str]:
    """Problems (one sentence each, naming the task and the fix) with `evaluation.tasks`.

    Local tasks need their data file; any other name must be an lm-eval task, and offline
    (HF_DATASETS_OFFLINE / HF_HUB_OFFLINE set) its hub dataset must be in the HF cache.
    The harness's task index is built only when a non-local task is named (a few seconds).
    """
    problems = []
    others = []
    for task in tasks:
        if task in LOCAL_TASKS:
            if not LOCAL_TASKS[task].is_file():
                problems.append(
                    f"study.evaluation.tasks: {task}: its data file {LOCAL_TASKS[task]} is "
                    "missing; restore it from the repository (git checkout -- jobs/evaluation)"
                )
        else:
            others.append(task)
    if not others:
        return problems
    manager = _task_manager(others)
    known = set(manager.all_tasks)
    for task in others:
        if task not in known:
            problems.append(
                f"study.evaluation.tasks: {task!r} is not an lm-evaluation-harness task; use a "
                f"name from `lm-eval ls tasks` or a local task ({', '.join(LOCAL_TASKS)})"
            )
            continue
        entry = manager.task_index[task]
        dataset = _dataset_path(entry)
        if dataset and "/" in dataset and _offline() and not _hub_cached(dataset):
            problems.append(
                f"study.evaluation.tasks: {task}: its dataset {dataset} is not in the Hugging "
                "Face cache and offline mode is set; fill the cache on a machine with hub access "
                f"(python -c \"import datasets; datasets.load_dataset('{dataset}')\") and share "
                "HF_HOME, or drop the task"
            )
    return problems


def _dataset_path(entry: Any) -> str | None:
    """The hub dataset a task's YAML names (None for groups and custom loaders)."""
    import yaml

    if (entry.cfg or {}).get("dataset_path"):
        return str(entry.cfg["dataset_path"])
    path = getattr(entry, "yaml_path", None)
    if not path:
        return None
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    for line in text.splitlines():  # the YAML may hold !function tags; read one key
        if line.startswith("dataset_path:"):
            value = yaml.safe_load(line.split(":", 1)[1])
            return str(value) if value else None
    return None


def _task_manager(tasks: list[str]):
    """The harness's task index over the local tasks, plus its own only when a task needs them
    (indexing the harness's ~10,000 task files costs seconds per cell)."""
    from lm_eval.tasks import TaskManager  # lazy: lm_eval only where tasks are loaded

    own = any(task not in LOCAL_TASKS for task in tasks)
    return TaskManager(include_path=str(TASKS_DIR), include_defaults=own)


def _bpb(sample: dict) -> float:
    """The correct continuation's bits per byte in one harness sample (multiple choice)."""
    target = int(sample["target"])
    _, continuation = sample["arguments"][target]
    loglik = float(sample["resps"][target][0][0])
    num_bytes = len(continuation.encode("utf-8"))
    return -loglik / (math.log(2) * num_bytes) if num_bytes else math.nan


def evaluate(
    model: Any,
    tokenizer: tuple[Any, int],
    seq_length: int,
    tasks: list[str],
    limit: int | None,
) -> dict[str, float]:
    """`{eval/<task>/acc, eval/<task>/bpb}` for `model` on `tasks` (first `limit` items each);
    `tokenizer` is (tokenizer, end-of-document id), as `harness.load_tokenizer` returns."""
    import lm_eval

    from jobs.evaluation.harness import MegatronLM  # lazy, like lm_eval above

    lm = MegatronLM(model, *tokenizer, seq_length)
    results = lm_eval.simple_evaluate(
        model=lm,
        tasks=list(tasks),
        limit=limit,
        task_manager=_task_manager(tasks),
        log_samples=True,
        bootstrap_iters=0,  # the harness's own stderr is not used: the verdict pairs seeds
        verbosity="ERROR",
    )
    metrics: dict[str, float] = {}
    for task in tasks:
        scores = results["results"][task]
        samples = results["samples"][task]
        metrics[C.eval_metric(task, "acc")] = float(scores["acc,none"])
        metrics[C.eval_metric(task, "bpb")] = float(sum(map(_bpb, samples)) / len(samples))
    return metrics


def evaluate_cell(config: Any, model: Any, tracker: Any, step: int) -> dict[str, float]:
    """Evaluate a finished cell once (its `evaluation.json` holds the numbers) and log them."""
    from jobs.evaluation.harness import check_layout, load_tokenizer  # lazy: torch, lm_eval

    spec = config.evaluation
    path = Path(config.output_dir) / RESULT_FILE
    if path.is_file():
        metrics = json.loads(path.read_text())
    else:
        check_layout(config.parallel.tensor_parallel, config.parallel.pipeline_parallel)
        tokenizer = load_tokenizer(config.data.path)
        metrics = evaluate(model, tokenizer, config.model.seq_length, spec.tasks, spec.limit)
        write_text(path, json.dumps(metrics, indent=1))
    tracker.log_metrics(metrics, step=step)
    return metrics
