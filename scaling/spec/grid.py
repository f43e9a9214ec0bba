"""The grid: a study becomes its cells, one fully resolved `jobs.RunConfig` each.

(`analysis.stats.variance.cells` is another thing: the analysis's grouping of finished runs.)

Every derived number of a cell is computed here by a named rule (`scaling.spec.ladder`), from the
size's nominal parameter count N, so every arm at a size shares tokens, batch and schedule and
differs only in its arm's overrides (`scaling.spec.ladder.resolve_arm`) and its learning rate:

- tokens D: `tokens.per_size[size]`, else `tokens_per_param × N`, rounded up to whole steps
  (with `tokens.branches`: the largest budget, and the cells of `scaling.spec.branches`);
- tokens per step: `batch.per_size[size]`, else fixed `batch.tokens`, else Porian's law; rounded
  to whole sequences, a multiple of DP × micro-batch, at least one such group;
- warmup: `schedule.warmup_steps` if set, else N tokens (Porian), at most a third of the steps;
- AdamW beta2: `optimizer.beta2` if set, else Porian's rule for the batch size.

Building each `RunConfig` with `from_dict` runs every model, parallelism and run-config check on
the real values, so a bad `study.optimizer` or TP not dividing heads surfaces here with the study
field named; every problem of every cell is collected, each reported once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from foundation import contract
from foundation.config import ConfigError, from_dict, to_dict
from jobs.config import RunConfig
from models.config import arm_model_fields
from scaling.spec.branches import branch_id, budgets, expand_family, longer_run
from scaling.spec.ladder import (
    ANY,
    arm_overrides,
    nominal_params,
    porian_batch_tokens,
    porian_beta2,
    porian_lr,
    porian_warmup_tokens,
    resolve_arm,
)
from scaling.spec.resources import split_problems
from scaling.spec.study import StudySpec

__all__ = [
    "Cell",
    "OfCell",
    "cell_id",
    "learning_rates",
    "grid_points",
    "expand_cells",
    "tokens_per_step",
    "num_steps",
    "longer_id",
]

MAX_WARMUP_FRACTION = 1 / 3  # tiny budgets would otherwise spend the whole run warming up


@dataclass(frozen=True)
class Cell:
    """One grid point and the run config that trains it."""

    cell_id: str
    size: str
    variant: str
    seed: int
    lr: float
    run: RunConfig
    round: int = 0  # LR-search round that added it; 0 = the starting grid
    kind: str = contract.KIND_RUN  # run | stable | branch (`scaling.spec.branches`)
    depends_on: str | None = None  # cell id that must complete first (a branch's stable run)

    @property
    def tags(self) -> dict[str, str]:
        """The MLflow tags that identify this cell (`cell_tags`, carried by its run config)."""
        return dict(self.run.tracking.tags)

    def with_parent(self, parent_run_id: str) -> Cell:
        """This cell with its run config pointing at the study's parent run (no re-expansion)."""
        tracking = dataclasses.replace(self.run.tracking, parent_run_id=parent_run_id)
        return dataclasses.replace(self, run=dataclasses.replace(self.run, tracking=tracking))

    @property
    def world_size(self) -> int:
        return self.run.parallel.world_size

    @property
    def tokens(self) -> int:
        """D the cell ends at: steps × tokens per step (a branch: its budget)."""
        return self.run.train.steps * self.run.tokens_per_step

    @property
    def flops(self) -> float:
        """C this cell computes: flops_per_token × the tokens it trains itself (a branch: from
        its fork on; the stable run computed the rest)."""
        from models.accounting import flops_per_token  # lazy: torch, not needed to expand a grid

        run = self.run
        start = run.init_from.step if run.init_from is not None else 0  # a branch's fork
        return float(flops_per_token(run.model)) * (run.train.steps - start) * run.tokens_per_step

    @property
    def config_hash(self) -> str:
        """Fingerprint of what the cell trains (not where it logs or writes): a finished run
        with another fingerprint was trained under a different recipe."""
        data = to_dict(self.run)
        # evaluation: what a cell is scored on after training, not what it trains
        for where in ("tracking", "output_dir", "evaluation"):
            data.pop(where)
        # fields added after studies had finished cells: left out at their default, so a
        # finished cell keeps the fingerprint it was trained under
        if data.get("init_weights") is None:
            data.pop("init_weights", None)
        if data["schedule"].get("warmup_divisor") == "steps":
            data["schedule"].pop("warmup_divisor")
        text = json.dumps(data, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


class OfCell:
    """What a row about one cell reads from the cell it holds (`cell`), not a copy of its fields:
    the plan's and the status's rows are these."""

    cell: Cell

    @property
    def cell_id(self) -> str:
        return self.cell.cell_id

    @property
    def size(self) -> str:
        return self.cell.size

    @property
    def variant(self) -> str:
        return self.cell.variant

    @property
    def seed(self) -> int:
        return self.cell.seed

    @property
    def lr(self) -> float:
        return self.cell.lr


def cell_tags(
    study: str, cid: str, variant: str, size: str, seed: int, lr: float, engine: str
) -> dict[str, str]:
    """The MLflow tags that identify a cell (`foundation.contract`)."""
    return {
        contract.TAG_STUDY: study,
        contract.TAG_CELL_ID: cid,
        contract.TAG_VARIANT: variant,
        contract.TAG_SIZE: size,
        contract.TAG_SEED: str(seed),
        contract.TAG_LR: f"{lr:.6g}",
        contract.TAG_ENGINE: engine,
    }


def cell_id(size: str, variant: str, seed: int, lr: float) -> str:
    """``"12M-nonlinear-s0-lr0.00976"``: sortable, readable, safe as a folder name."""
    return f"{size}-{variant}-s{seed}-lr{lr:.3g}"


def learning_rates(study: StudySpec, variant: str, size: str) -> list[float]:
    """The LR grid of (variant, size): explicit grid entries, else the law × multipliers."""
    grid = study.lr.grid
    for key in (variant, resolve_arm(variant)[0], ANY):
        if size in grid.get(key, {}):
            return list(grid[key][size])
    assert study.lr.law == "porian", "validate() guarantees a grid entry when law is 'none'"
    base = porian_lr(nominal_params(study.shape(size)))
    return [base * m for m in study.lr.multipliers]


def tokens_per_step(study: StudySpec, size: str, seq_length: int) -> int:
    """Global batch in tokens: whole sequences, a multiple of DP × micro-batch sequences."""
    if size in study.batch.per_size:
        target = study.batch.per_size[size]
    elif study.batch.rule == "fixed":
        target = study.batch.tokens
    else:
        target = porian_batch_tokens(nominal_params(study.shape(size)))
    group = study.parallel_for(size).data_parallel * study.batch.micro_batch_size * seq_length
    return max(1, round(target / group)) * group


def num_steps(study: StudySpec, size: str, step_tokens: int) -> int:
    """Optimiser steps to train the size's (largest) token budget, rounded up to whole steps."""
    return max(1, math.ceil(max(budgets(study, size)) / step_tokens))


def _run_dict(
    study: StudySpec,
    size: str,
    variant: str,
    seed: int,
    lr: float,
    vocab_size: int,
    round_: int = 0,
) -> dict[str, Any]:
    shape = study.shape(size)
    par = study.parallel_for(size)
    seq_length = int(study.model["seq_length"])  # required by scaling.spec.checks
    step_tokens = tokens_per_step(study, size, seq_length)
    steps = num_steps(study, size, step_tokens)
    n = nominal_params(shape)
    schedule = dict(study.schedule)
    if schedule.get("warmup_steps") is None:
        warmup = math.ceil(porian_warmup_tokens(n) / step_tokens)
        schedule["warmup_steps"] = min(warmup, int(steps * MAX_WARMUP_FRACTION))
    optimizer = {"beta2": porian_beta2(step_tokens), **study.optimizer, "lr": lr}
    arm = resolve_arm(variant)[0]
    cid = cell_id(size, arm, seed, lr)
    # the variant's own model overrides go on top of the study's (ValueError naming them)
    model = arm_model_fields(
        {
            "vocab_size": vocab_size,
            "seq_length": seq_length,
            **study.model,
            "num_layers": shape.num_layers,
            "hidden_size": shape.hidden_size,
            "num_attention_heads": shape.num_attention_heads,
            **arm_overrides(variant, shape.hidden_size, par.tensor_parallel),
        }
    )
    tags = cell_tags(study.name, cid, arm, size, seed, lr, study.engine)
    tags[contract.TAG_ROUND] = str(round_)
    return {
        "name": cid,
        "study": study.name,
        "seed": seed,
        "model": model,
        "data": {
            "path": str(study.dataset_path),
            "seed": study.data.seed + seed,
            "num_val_windows": study.data.num_val_windows,
            "val_seed": study.data.val_seed,
            "num_select_windows": study.data.num_select_windows,
        },
        "optimizer": optimizer,
        "schedule": schedule,
        "train": {
            **study.train,
            "steps": steps,
            "global_batch_tokens": step_tokens,
            "micro_batch_size": study.batch.micro_batch_size,
        },
        "parallel": {
            "tensor_parallel": par.tensor_parallel,
            "pipeline_parallel": par.pipeline_parallel,
            "data_parallel": par.data_parallel,
        },
        "engine": study.engine,
        "deepspeed": dict(study.deepspeed),
        "tracking": {
            "tracking_uri": study.mlflow.tracking_uri,
            "experiment": study.mlflow.experiment,
            "parent_run_id": None,  # set by Cell.with_parent at submit
            "tags": tags,
        },
        "precision": study.precision,
        "output_dir": str(study.folder / "cells" / cid),
        "evaluation": None if study.evaluation is None else vars(study.evaluation),
    }


def grid_points(study: StudySpec) -> list[tuple[str, str, int, float, int]]:
    """(size, variant, seed, lr, round 0) of the starting grid, in a stable order.

    With `lr.search` only its scan seeds run the starting grid; the others follow later, as do
    the sizes past the first wave with `lr.search.transfer: law`.
    """
    return [
        (size, variant, seed, lr, 0)
        for size in study.first_wave  # "2M" before "12M"
        for variant in study.variants
        for lr in learning_rates(study, variant, size)
        for seed in study.scan_seeds
    ]


def expand_cells(study: StudySpec, vocab_size: int, added: list[tuple] = ()) -> list[Cell]:
    """Every cell of the grid (sizes × variants × seeds × LRs), in a stable order.

    `added`: (size, variant, seed, lr, round) of cells LR-search rounds, looks and resolves
    added (`scaling.spec.loader`), appended after the starting grid through the same path; a
    sixth element, tokens, is a resolve's longer run (`branches.longer_run`). Raises one
    ConfigError listing every problem, each once, named by the study field: resolved run
    configs that are invalid (e.g. TP does not divide a size's heads) and cells that would
    coincide.
    """
    cells: list[Cell] = []
    seen: dict[str, str] = {}
    problems: dict[str, str] = {}  # problem → where it showed first
    split_by_size = {size: split_problems(study, size) for size in study.sizes}
    # a cell's seeds differ in its name, seed, data seed, output folder and tags alone: its
    # nested sections are validated once (10,000 cells: most of `plan`'s time was this)
    validated: set[tuple] = set()
    for size in sorted(study.sizes, key=contract.size_key):
        for message in split_by_size[size]:
            problems.setdefault(message, f"size {size}")
    for size, variant, seed, lr, round_, *longer in [*grid_points(study), *added]:
        if size not in split_by_size:  # one more size a resolve bought (scaling.spec.next_size)
            split_by_size[size] = split_problems(study, size)
            for message in split_by_size[size]:
                problems.setdefault(message, f"size {size}, bought by resolve.json")
        if split_by_size[size]:
            continue
        try:
            base = _run_dict(study, size, variant, seed, lr, vocab_size, round_)
        except ValueError as err:  # the variant's model overrides (models.config)
            index = study.variants.index(variant) if variant in study.variants else 0
            problems.setdefault(f"study.variants[{index}]: {err}", f"size {size}")
            continue
        members, family_problems = (  # WSD branches; a resolve's longer run is one run
            ([(longer_run(study, base, longer[0]), contract.KIND_RUN, None)], [])
            if longer
            else expand_family(study, size, base)
        )
        for message in family_problems:
            problems.setdefault(message, f"size {size}")
        where = f"size {size}, variant {variant}, seed {seed}, lr {lr!r}"
        where += f", round {round_} of lr_search.json" if round_ else ""
        arm = resolve_arm(variant)[0]
        for index, (data, kind, depends_on) in enumerate(members):
            cid = data["name"]
            if cid in seen:
                problems.setdefault(
                    f"study.lr: duplicate cell {cid} from ({where}) and ({seen[cid]}); "
                    "learning rates that round to the same 3 digits collide; remove one",
                    f"cell {cid}",
                )
                continue
            seen[cid] = where
            key = (size, variant, lr, round_, index)
            try:
                run = from_dict(RunConfig, data, where="run", tree=key not in validated)
                validated.add(key)
            except ConfigError as err:
                for message in err.problems:
                    problems.setdefault(_study_path(study, message, size), f"cell {cid}")
                continue
            cells.append(
                Cell(cid, size, arm, seed, lr, run, round=round_, kind=kind, depends_on=depends_on)
            )
    if problems:
        raise ConfigError(f"{message} ({first})" for message, first in problems.items())
    return cells


# Run-config sections copied from the study section of the same name.
_FROM_STUDY = re.compile(
    r"^run\.(optimizer|schedule|train|deepspeed|model|precision|engine|evaluation)\b"
)


# Model fields the size's shape sets: an explicit shape's own field, else the ladder rule's.
_SHAPE_FIELD = re.compile(r"^run\.model\.(num_layers|hidden_size|num_attention_heads)\b")


def _study_path(study: StudySpec, message: str, size: str) -> str:
    """Point a run-config problem back at the study field that produced it."""
    if size in study.ladder.shapes:
        message = _SHAPE_FIELD.sub(rf"study.ladder.shapes.{size}.\1", message)
    else:
        message = _SHAPE_FIELD.sub(rf"study.sizes ({size}, by the ladder rule): \1", message)
    message = _FROM_STUDY.sub(r"study.\1", message)
    if message.startswith("run.parallel") or "parallel." in message:
        message += f" (set study.parallel.{size}, or an explicit shape under study.ladder.shapes)"
    return message


def longer_id(study: StudySpec, size: str, cid: str, tokens: float) -> dict[str, Any]:
    """`{cell_id, tokens}` of the longer run of cell `cid` to `tokens` (`longer_run`'s id and
    its budget rounded up to whole steps), as `resolve.json` records a bought one."""
    step_tokens = tokens_per_step(study, size, int(study.model["seq_length"]))
    budget = max(1, math.ceil(tokens / step_tokens)) * step_tokens
    return {"cell_id": branch_id(cid, budget), "tokens": budget}
