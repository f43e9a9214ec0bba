"""The checks a study spec needs nothing but itself for, every problem collected at once.

`check_study` runs from `scaling.spec.loader.study_from_dict` once `foundation.config.from_dict`
has parsed every section (after the
types are right) and raises one ConfigError listing each problem with its dotted path and fix.
What the sections passed through to the run config (`optimizer`, `schedule`, `train`,
`deepspeed`, `model`) may hold is checked by building each cell's real run config
(`scaling.spec.grid.expand_cells`), not here with made-up values.
"""

from __future__ import annotations

import math
import re

from analysis.tables.spec import DEFAULT_MARGIN_PCT
from foundation.config import Problems
from foundation.contract import parse_size
from scaling.spec.ladder import ANY, ARMS, resolve_arm
from scaling.spec.resources import check_tasks_per_node
from scaling.spec.round_checks import check_search, check_seed_rounds, check_transfer
from scaling.spec.source_checks import check_data, check_evaluation, tracking_uri_ok
from scaling.spec.study import StudySpec
from scaling.spec.value_checks import section_key_problems

__all__ = ["check_study"]

MAX_NAME_CHARS = 100
# Far past any study (Chinchilla's optimum is 20 tokens per parameter, heavily over-trained
# models ~2,000; the largest runs ~15T tokens); beyond them a budget's FLOPs and seconds can
# overflow a float (plan: OverflowError, no error line)
MAX_TOKENS_PER_PARAM = 1e6
MAX_TOKENS = 1e15
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# ModelConfig fields a study sets itself (the ladder gives the shape, the arm the variant).
_MODEL_FIELDS_OWNED = {
    "num_layers": "sizes / ladder.shapes",
    "hidden_size": "sizes / ladder.shapes",
    "num_attention_heads": "sizes / ladder.shapes",
    "query_variant": "variants",
    "qk_norm": "variants (linear_qknorm)",
    "ffn_hidden_size": "variants (wider_mlp)",
}


def check_study(study: StudySpec) -> None:
    """Raise ConfigError listing every problem of the spec (names, grid, recipe, resources)."""
    p = Problems()
    if not _NAME.match(study.name):
        p.add(
            f"study.name: {study.name!r} must be letters, digits, '.', '_' or '-' (it names "
            "folders and MLflow tags)"
        )
    elif len(study.name) > MAX_NAME_CHARS:
        p.add(
            f"study.name: {len(study.name)} characters, over {MAX_NAME_CHARS} (it names "
            "folders, cells and MLflow runs); use a shorter name"
        )
    if not study.mlflow.experiment:
        p.add("study.mlflow.experiment: empty; name the MLflow experiment")
    if not tracking_uri_ok(study.mlflow.tracking_uri):
        p.add(
            f"study.mlflow.tracking_uri: {study.mlflow.tracking_uri!r} is not a tracking URI; "
            "use e.g. http://127.0.0.1:5000 or sqlite:///path/mlflow.db"
        )
    check_data(study, p)
    _check_grid(study, p)
    _check_recipe(study, p)
    _check_lr(study, p)
    _check_resources(study, p)
    if study.evaluation is not None and study.evaluation.tasks:
        check_evaluation(study, p)
    margin = study.verdict.margin_pct
    if not (isinstance(margin, int | float) and 0 < margin < 100):
        p.add(
            f"study.verdict.margin_pct: {margin!r}; give a positive % of the loss, e.g. "
            f"{DEFAULT_MARGIN_PCT:g}"
        )
    # a misspelt arm is reported once, at `study.variants`, not again as an unknown baseline
    variants_ok = not any(item.startswith("study.variants") for item in p.items)
    for problem in study.verdict.problems(list(study.variants)):
        if variants_ok or not problem.startswith("study.verdict.baseline"):
            p.add(problem)
    for problem in section_key_problems(vars(study)):
        p.add(problem)
    p.raise_if_any()


def _check_list(p: Problems, field_name: str, values: list, example: str) -> None:
    if not values:
        p.add(f"study.{field_name}: empty; give at least one ({example})")
    seen = set()
    for i, value in enumerate(values):
        if value in seen:
            p.add(
                f"study.{field_name}[{i}]: {value!r} is listed twice, which would duplicate "
                "cells; remove the repeat"
            )
        seen.add(value)


def _size_ok(p: Problems, where: str, size: str) -> bool:
    try:
        parse_size(size)
    except ValueError as err:
        p.add(f"{where}: {err}")
        return False
    return True


def _check_keys(p: Problems, where: str, table: dict, sizes: list[str], allow_any: bool) -> None:
    for key in table:
        if (key == ANY and allow_any) or key in sizes:
            continue
        extra = " or '*'" if allow_any else ""
        p.add(f"{where}.{key}: not one of study.sizes ({', '.join(sizes)}){extra}; fix the key")


def _check_grid(study: StudySpec, p: Problems) -> None:
    _check_list(p, "sizes", study.sizes, "e.g. [2M, 6M, 25M]")
    _check_list(
        p, "variants", study.variants, f"e.g. [linear, nonlinear]; known: {', '.join(ARMS)}"
    )
    _check_list(p, "seeds", study.seeds, "e.g. [0, 1, 2]")
    check_seed_rounds(study, p)
    for i, variant in enumerate(study.variants):
        try:
            resolve_arm(variant)
        except ValueError as err:
            p.add(f"study.variants[{i}]: {err}")
    for i, seed in enumerate(study.seeds):
        if seed < 0:
            p.add(f"study.seeds[{i}]: {seed} is negative; seeds are >= 0")
    _check_keys(p, "study.ladder.shapes", study.ladder.shapes, study.sizes, allow_any=False)
    for size, shape in study.ladder.shapes.items():
        for name in ("num_layers", "hidden_size", "num_attention_heads"):
            if getattr(shape, name) < 1:
                p.add(f"study.ladder.shapes.{size}.{name}: must be >= 1")
    ladder_ok = study.ladder.aspect_ratio > 0 and study.ladder.head_dim >= 1
    if not ladder_ok:
        p.add("study.ladder: aspect_ratio must be > 0 and head_dim >= 1")
    for i, size in enumerate(study.sizes):
        if _size_ok(p, f"study.sizes[{i}]", size) and ladder_ok:
            try:
                study.shape(size)
            except ValueError as err:
                p.add(f"study.sizes[{i}]: {err}")
    for owned, where in _MODEL_FIELDS_OWNED.items():
        if owned in study.model:
            p.add(
                f"study.model.{owned}: set by the study's {where}, not in study.model; remove "
                "it here"
            )
    seq_length = study.model.get("seq_length")
    if seq_length is None:
        p.add("study.model.seq_length: required; the tokens per sequence, e.g. 1024")
    elif isinstance(seq_length, int) and seq_length < 1:  # its type: value_checks
        p.add(
            f"study.model.seq_length: {seq_length!r} must be a whole number >= 1 (tokens per "
            "sequence, e.g. 1024)"
        )


def _check_recipe(study: StudySpec, p: Problems) -> None:
    tokens, batch = study.tokens, study.batch
    _check_keys(p, "study.tokens.per_size", tokens.per_size, study.sizes, allow_any=False)
    for size, value in tokens.per_size.items():
        if not value > 0:
            p.add(f"study.tokens.per_size.{size}: {value} must be > 0 tokens")
        elif MAX_TOKENS < value < math.inf:  # inf: value_checks
            p.add(f"study.tokens.per_size.{size}: {value:g} tokens is over {MAX_TOKENS:g}")
    if tokens.tokens_per_param is not None and not tokens.tokens_per_param > 0:
        p.add(f"study.tokens.tokens_per_param: {tokens.tokens_per_param} must be > 0 (e.g. 20)")
    elif MAX_TOKENS_PER_PARAM < (tokens.tokens_per_param or 0) < math.inf:  # inf: value_checks
        p.add(
            f"study.tokens.tokens_per_param: {tokens.tokens_per_param:g} is over "
            f"{MAX_TOKENS_PER_PARAM:g} tokens per parameter; give the ratio (e.g. 20), or the "
            "tokens of each size in tokens.per_size"
        )
    missing = [s for s in study.sizes if s not in tokens.per_size]
    explicit_counts = bool(tokens.branches) and all(b > 1 for b in tokens.branches)
    if tokens.tokens_per_param is None and missing and not explicit_counts:
        p.add(
            f"study.tokens: no budget for size(s) {', '.join(missing)}; set tokens_per_param or "
            "per_size for them"
        )
    if tokens.branches is not None:
        _check_branches(study, p)
    if batch.rule == "fixed" and batch.tokens is None:
        p.add("study.batch.tokens: required with rule 'fixed' (tokens per step)")
    if batch.tokens is not None and batch.tokens < 1:
        p.add(f"study.batch.tokens: {batch.tokens} must be >= 1")
    _check_keys(p, "study.batch.per_size", batch.per_size, study.sizes, allow_any=False)
    for size, value in batch.per_size.items():
        if value < 1:
            p.add(f"study.batch.per_size.{size}: {value} must be >= 1 tokens")
    if batch.micro_batch_size < 1:
        p.add(f"study.batch.micro_batch_size: {batch.micro_batch_size} must be >= 1")
    if "lr" in study.optimizer:
        p.add("study.optimizer.lr: set learning rates under study.lr, not here")
    for owned in ("steps", "global_batch_tokens", "micro_batch_size"):
        if owned in study.train:
            p.add(f"study.train.{owned}: derived from study.tokens / study.batch; remove it")


def _check_branches(study: StudySpec, p: Problems) -> None:
    """WSD branches (scaling.spec.branches): increasing budgets of one kind, a cooldown, a WSD
    recipe.

    Whole branch points after warmup need the tokens per step, so `scaling.spec.grid` checks those.
    """
    tokens, where = study.tokens, "study.tokens"
    branches = tokens.branches or []
    if not branches:
        p.add(f"{where}.branches: empty; give budgets (e.g. [0.25, 0.5, 1.0]) or remove it")
    for i, b in enumerate(branches):
        if not b > 0:
            p.add(f"{where}.branches[{i}]: {b} must be > 0 (a fraction <= 1 or a token count)")
        elif MAX_TOKENS < b < math.inf:  # inf: value_checks
            p.add(f"{where}.branches[{i}]: {b:g} tokens is over {MAX_TOKENS:g}")
    fractions = [b <= 1 for b in branches if b > 0]
    if fractions and any(fractions) and not all(fractions):
        p.add(
            f"{where}.branches: {branches} mixes fractions (<= 1) and token counts (> 1); use "
            "only fractions of the size's budget, or only token counts"
        )
    if any(b >= a for a, b in zip(branches[1:], branches, strict=False)):
        p.add(f"{where}.branches: {branches} must be strictly increasing; sort them, no repeats")
    if fractions and not any(fractions) and tokens.per_size:
        p.add(
            f"{where}.per_size: not used with explicit branch token counts (the same budgets "
            "for every size); remove it, or give branches as fractions of it"
        )
    if not 0 < tokens.cooldown < 1:
        p.add(f"{where}.cooldown: {tokens.cooldown} must be in (0, 1), e.g. 0.2")
    kind = study.schedule.get("kind")
    if kind not in (None, "wsd"):
        p.add(
            f"study.schedule.kind: {kind!r} cannot branch; tokens.branches needs a "
            "warmup-stable-decay schedule: set kind: wsd or remove it"
        )
    for owned, instead in (("decay_fraction", "cooldown"), ("decay_shape", "cooldown_shape")):
        if owned in study.schedule:
            p.add(
                f"study.schedule.{owned}: set by tokens.{instead} when tokens.branches is "
                "given; remove it here"
            )


def _check_lr(study: StudySpec, p: Problems) -> None:
    lr = study.lr
    if lr.law != "none":
        _check_list(p, "lr.multipliers", lr.multipliers, "e.g. [0.5, 1, 2]")
        for i, m in enumerate(lr.multipliers):
            if not m > 0:
                p.add(f"study.lr.multipliers[{i}]: {m} must be > 0")
    arms = _arm_names(study.variants)  # entry as written -> the arm's name
    for variant, per_size in lr.grid.items():
        if variant != ANY and variant not in study.variants and variant not in arms.values():
            names = sorted({*study.variants, *arms.values()})
            p.add(
                f"study.lr.grid.{variant}: not one of study.variants or their arm names "
                f"({', '.join(names)}) or '*'"
            )
        for entry, arm in arms.items():
            if variant == arm != entry and entry in lr.grid:
                p.add(
                    f"study.lr.grid.{variant}: the arm of {entry!r}, which has its own grid "
                    "entry too; keep one of them"
                )
        _check_keys(p, f"study.lr.grid.{variant}", per_size, study.sizes, allow_any=False)
        for size, values in per_size.items():
            _check_list(p, f"lr.grid.{variant}.{size}", values, "e.g. [1e-3, 2e-3]")
            for i, value in enumerate(values):
                if not value > 0:
                    p.add(f"study.lr.grid.{variant}.{size}[{i}]: {value} must be > 0")
    check_search(study, p)
    check_transfer(study, p)
    if lr.law == "none":
        for variant in study.variants:
            keys = (variant, arms.get(variant), ANY)  # as `scaling.spec.grid.learning_rates`
            for size in study.sizes:
                if not any(size in lr.grid.get(k, {}) for k in keys):
                    p.add(
                        f"study.lr.grid: no learning rates for ({variant}, {size}) and lr.law "
                        "is 'none'; add grid entries or use law 'porian'"
                    )


def _arm_names(variants: list[str]) -> dict[str, str]:
    """Each entry of `variants` that resolves, with its arm's name (`scaling.spec.ladder`)."""
    arms = {}
    for entry in variants:
        try:
            arms[entry] = resolve_arm(entry)[0]
        except ValueError:
            continue  # reported by _check_grid
    return arms


def _check_resources(study: StudySpec, p: Problems) -> None:
    _check_keys(p, "study.parallel", study.parallel, study.sizes, allow_any=True)
    for key, par in study.parallel.items():
        for name in ("tensor_parallel", "pipeline_parallel", "data_parallel"):
            if getattr(par, name) < 1:
                p.add(f"study.parallel.{key}.{name}: must be >= 1")
        if par.gpus_per_job is not None and par.gpus_per_job != par.world_size:
            p.add(
                f"study.parallel.{key}.gpus_per_job: {par.gpus_per_job} != TP x PP x DP = "
                f"{par.tensor_parallel} x {par.pipeline_parallel} x {par.data_parallel} = "
                f"{par.world_size}; set gpus_per_job to {par.world_size} or change TP/PP/DP"
            )
    if study.retries < 0:
        p.add(f"study.retries: {study.retries} must be >= 0 (0: a failed cell is not resubmitted)")
    if study.local.max_parallel < 1 or study.local.timeout_min < 1:
        p.add("study.local: max_parallel and timeout_min must be >= 1")
    slurm = study.slurm
    for name in ("time_limit_min", "cpus_per_task", "array_parallelism", "max_timeouts"):
        if getattr(slurm, name) < 1:
            p.add(f"study.slurm.{name}: {getattr(slurm, name)} must be >= 1")
    if slurm.max_submitted is not None and (
        isinstance(slurm.max_submitted, bool)
        or not isinstance(slurm.max_submitted, int)
        or slurm.max_submitted < 1
    ):
        p.add(
            f"study.slurm.max_submitted: {slurm.max_submitted!r} must be a whole number >= 1 "
            "(the most of your jobs queued at once), or left out for the cluster's own limits"
        )
    if slurm.gpus_per_node < 0:
        p.add(f"study.slurm.gpus_per_node: {slurm.gpus_per_node} must be >= 0")
    if slurm.tasks_per_node is not None:
        check_tasks_per_node(study, p)
    if slurm.gpus_per_node > 0:
        for size in study.sizes:
            world = study.parallel_for(size).world_size
            if world > slurm.gpus_per_node and world % slurm.gpus_per_node:
                p.add(
                    f"study.parallel: size {size} needs {world} GPUs, not a whole number of "
                    f"nodes of study.slurm.gpus_per_node={slurm.gpus_per_node}; use a multiple "
                    "of it"
                )
    if study.cost.flops_per_gpu_s <= 0:
        p.add("study.cost.flops_per_gpu_s: must be > 0 (e.g. 4e14)")
    if study.cost.startup_s < 0:
        p.add(f"study.cost.startup_s: {study.cost.startup_s} must be >= 0 (seconds per cell)")
    if study.cost.step_s < 0:
        p.add(f"study.cost.step_s: {study.cost.step_s} must be >= 0 (seconds per training step)")
