"""WSD cooldown branches: several token budgets of one size from one long run.

With `tokens.branches`, each (size, variant, seed, lr) becomes a family of cells instead of one:

- `<cell id>-stable` (kind `stable`): warmup, then the constant peak LR (schedule `constant`)
  up to the last branch point, saving a kept checkpoint at every branch point;
- `<cell id>-D<tokens:.3g>` (kind `branch`), one per budget: starts from the stable run's
  checkpoint at its branch point (`init_from`) and decays to the floor over the last `cooldown`
  of its own steps (schedule `wsd`). Step for step it is the independent WSD run to its budget.

Rounding, the one place it happens: a budget of D tokens trains N = ceil(D / tokens per step)
steps (so it logs `tokens` = N x tokens per step); its cooldown is the last
max(1, round(cooldown x N)) steps, so it forks at step k = N - that
(`jobs.config.ScheduleConfig.decay_start`, the same function the LR schedule uses). Every
member draws its sample order for the largest budget's steps (`train.dataset_steps`), so all
read identical batches. The stable run stops at the last branch point: nothing after it is
ever measured (so a 4-budget family costs about 0.8 x 8 + 0.2 x 15 = 9.4 units instead of 15).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from foundation import contract
from jobs.config import ScheduleConfig
from scaling.spec.ladder import nominal_params

if TYPE_CHECKING:
    from scaling.spec.study import StudySpec

__all__ = [
    "Branch",
    "size_budget",
    "budgets",
    "family",
    "expand_family",
    "stable_id",
    "branch_id",
    "longer_run",
]


@dataclass(frozen=True)
class Branch:
    """One budget of a family: its length and where it forks from the stable run."""

    tokens: int  # steps x tokens per step: the D it logs
    steps: int
    branch_step: int  # the stable run's step it starts from (its decay's first step)


def size_budget(study: StudySpec, size: str) -> float:
    """The size's token budget: `tokens.per_size[size]`, else `tokens_per_param` x N."""
    if size in study.tokens.per_size:
        return study.tokens.per_size[size]
    return study.tokens.tokens_per_param * nominal_params(study.shape(size))


def budgets(study: StudySpec, size: str) -> list[float]:
    """The size's budgets in tokens: its one budget, or one per branch (fractions of it, or
    the explicit counts, the same for every size)."""
    branches = study.tokens.branches
    if not branches:
        return [size_budget(study, size)]
    if all(b <= 1 for b in branches):
        base = size_budget(study, size)
        return [b * base for b in branches]
    return [float(b) for b in branches]


def family(study: StudySpec, size: str, step_tokens: int, warmup_steps: int) -> list[Branch]:
    """The size's branches, rounded to whole steps (see the module docstring)."""

    out = []
    for budget in budgets(study, size):
        steps = max(1, math.ceil(budget / step_tokens))
        schedule = ScheduleConfig(
            kind="wsd", warmup_steps=warmup_steps, decay_fraction=study.tokens.cooldown
        )
        out.append(Branch(steps * step_tokens, steps, schedule.decay_start(steps)))
    return out


def family_problems(
    size: str, members: list[Branch], warmup_steps: int, cooldown: float
) -> list[str]:
    """Budgets that give no whole branch point after warmup, or collide after rounding."""
    problems = []
    where = "study.tokens.branches"
    for i, b in enumerate(members):
        fork = b.steps - max(1, round(cooldown * b.steps))  # before decay_start's warmup clamp
        if fork < max(warmup_steps, 1):
            problems.append(
                f"{where}[{i}]: at size {size} the budget of {b.tokens:.3g} tokens is {b.steps} "
                f"steps; its cooldown would start at step {fork}, before warmup ends "
                f"({warmup_steps} steps), so it has no branch point after warmup; raise the "
                "budget, or lower schedule.warmup_steps or tokens.cooldown"
            )
        for j, other in enumerate(members[:i]):
            if other.branch_step >= b.branch_step:
                problems.append(
                    f"{where}[{i}]: at size {size} budgets [{j}] and [{i}] round to {other.steps}"
                    f" and {b.steps} steps with branch points {other.branch_step} and "
                    f"{b.branch_step}; space them further apart or use smaller steps "
                    "(study.batch)"
                )
    return problems


def stable_id(cid: str) -> str:
    return f"{cid}-stable"


def branch_id(cid: str, tokens: int) -> str:
    return f"{cid}-D{tokens:.3g}"


def _member(base: dict[str, Any], cid: str, tags: dict[str, str]) -> dict[str, Any]:
    data = copy.deepcopy(base)
    data["name"] = cid
    data["output_dir"] = str(Path(base["output_dir"]).with_name(cid))
    data["tracking"]["tags"] = {**data["tracking"]["tags"], contract.TAG_CELL_ID: cid, **tags}
    return data


def expand_family(
    study: StudySpec, size: str, base: dict[str, Any]
) -> tuple[list[tuple[dict[str, Any], str, str | None]], list[str]]:
    """([(run dict, kind, depends_on)], problems) for one grid point's run dict `base`.

    Without branches: the base itself, kind `run`. With them: the stable run and its branches.
    """
    if not study.tokens.branches:
        return [(base, contract.KIND_RUN, None)], []
    train, schedule = base["train"], base["schedule"]
    warmup = int(schedule["warmup_steps"])
    members = family(study, size, train["global_batch_tokens"], warmup)
    problems = family_problems(size, members, warmup, study.tokens.cooldown)
    if problems:
        return [], problems
    horizon = max(b.steps for b in members)
    points = [b.branch_step for b in members]
    cid = base["name"]

    sid = stable_id(cid)
    stable = _member(base, sid, {contract.TAG_CELL_KIND: contract.KIND_STABLE})
    stable["schedule"] = {**schedule, "kind": "constant"}
    stable["train"] = {
        **train,
        "steps": max(points),
        "keep_steps": points,
        "dataset_steps": horizon,
    }
    out: list[tuple[dict[str, Any], str, str | None]] = [(stable, contract.KIND_STABLE, None)]
    for b in members:
        tags = {
            contract.TAG_CELL_KIND: contract.KIND_BRANCH,
            contract.TAG_PARENT_CELL: sid,
            contract.TAG_BRANCH_TOKENS: str(b.tokens),
            contract.TAG_BRANCH_STEP: str(b.branch_step),
        }
        branch = _member(base, branch_id(cid, b.tokens), tags)
        branch["schedule"] = {
            **schedule,
            "kind": "wsd",
            "decay_fraction": study.tokens.cooldown,
            "decay_shape": study.tokens.cooldown_shape,
        }
        branch["train"] = {**train, "steps": b.steps, "dataset_steps": horizon}
        branch["init_from"] = {"output_dir": stable["output_dir"], "step": b.branch_step}
        out.append((branch, contract.KIND_BRANCH, sid))
    return out, []


def longer_run(study: StudySpec, base: dict[str, Any], tokens: float) -> dict[str, Any]:
    """The run dict of a grid point trained to `tokens` on its own (what `--resolve` buys as
    longer training at the top, past the family's largest budget): the study's WSD schedule
    from step 0, which is the branch at that budget would be step for step, named and tagged
    like one (`<cell id>-D<tokens>`, its budget), kind `run`: no stable run is extended."""
    step_tokens = int(base["train"]["global_batch_tokens"])
    steps = max(1, math.ceil(tokens / step_tokens))
    budget = steps * step_tokens
    run = _member(base, branch_id(base["name"], budget), {contract.TAG_BRANCH_TOKENS: str(budget)})
    run["schedule"] = {
        **base["schedule"],
        "kind": "wsd",
        "decay_fraction": study.tokens.cooldown,
        "decay_shape": study.tokens.cooldown_shape,
    }
    run["train"] = {**base["train"], "steps": steps}
    return run
