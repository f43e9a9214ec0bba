"""LR transfer in the LR search (`lr.search.transfer: law`): sizes in waves, each arm on its law.

Why: the LR scan at the largest sizes is most of a ladder's cost; `analysis.stats.lr.lr_law` fits
each arm's best LR against N from the sizes it has finished and scans a new size only on the
LRs that law cannot exclude (1-2 instead of 3), and declares the law broken for an arm when a
size's optimum falls outside it.

How it rides on the search's rounds (`scaling.lr_search.extend_grid.decide_round`):
- the starting grid holds the first `law_sizes` sizes only (`StudySpec.first_wave`);
- when no arm is left at an edge, the next size, smallest first, is added as one round (a
  *wave*): per arm, the law's LRs (reason `law: ...`) or, before the law exists, when it is
  broken or too uncertain to save an LR, the full grid (reason `wave: ...`);
- an arm scanned on its law whose winner sits at an edge of those LRs has that edge extended, as
  any other: the analysis compares an arm only at a best LR with a completed neighbour on each
  side (`analysis.stats.lr.frontier`; an unbracketed compared cell makes the verdict
  inconclusive), so a law does not stand in for a bracket. Once a law is broken every later size of
  the arm gets the full grid. `max_rounds` counts edge rounds since the last wave.
Every decision is a pure function of the runs' results and the state file, as the search's are.
"""

from __future__ import annotations

import numpy as np

from analysis.stats.lr.frontier import LRFrontier, fmt_lr
from analysis.stats.lr.lr_law import ArmPlan, plan_arm
from foundation import contract
from scaling.spec.branches import budgets
from scaling.spec.grid import learning_rates
from scaling.spec.ladder import nominal_params, resolve_arm
from scaling.spec.study import StudySpec
from scaling.state.files.search_state import AddedLR, SearchState

__all__ = ["is_on", "rounds_since_wave", "next_wave", "broken_laws"]

LAW, WAVE = "law", "wave"  # reasons of the LRs a wave adds: on the arm's law, or its full grid


def is_on(spec: StudySpec) -> bool:
    search = spec.lr.search
    return search is not None and search.transfer == LAW


def _num_params(spec: StudySpec, size: str) -> float:
    return float(nominal_params(spec.shape(size)))


def _grid(spec: StudySpec, arm: str, size: str) -> tuple[list[float], float]:
    """The arm's starting LRs at `size` and the search's step between LRs."""
    variant = {resolve_arm(v)[0]: v for v in spec.variants}.get(arm, arm)
    lrs = sorted(learning_rates(spec, variant, size))
    factor = spec.lr.search.step_factor
    if factor is None:
        factor = float(np.exp(np.median(np.diff(np.log(lrs))))) if len(lrs) > 1 else 2.0
    return lrs, factor


def _done(spec: StudySpec, frontiers: list[LRFrontier], arm: str, below: str | None = None):
    """(N, tried LR -> mean loss, the lowest diverged LR above the best: the optimum lies below
    it) of the arm's sizes with usable LRs, up to `below` included."""
    key = contract.size_key
    return [
        (_num_params(spec, f.size), f.mean_loss, f.censored_at)
        for f in sorted(frontiers, key=lambda f: key(f.size))
        if f.variant == arm and f.mean_loss and (below is None or key(f.size) <= key(below))
    ]


def _plan(spec: StudySpec, frontiers: list[LRFrontier], arm: str, size: str, upto=None) -> ArmPlan:
    lrs, step = _grid(spec, arm, size)
    done = _done(spec, frontiers, arm, upto)
    law_sizes = spec.lr.search.law_sizes
    return plan_arm(
        arm, done, _num_params(spec, size), lrs[len(lrs) // 2], step, min_sizes=law_sizes
    )


def rounds_since_wave(state: SearchState) -> int:
    """Edge rounds added since the last wave (all rounds when there is none)."""
    waves = [a.round for a in state.added if a.reason.startswith((LAW, WAVE))]
    return state.round - max(waves, default=0)


def next_wave(
    spec: StudySpec, frontiers: list[LRFrontier], state: SearchState, round_: int
) -> list[AddedLR]:
    """The next size's LRs per arm, smallest size not yet started; [] when every size has."""
    started = set(spec.first_wave) | {a.size for a in state.added}
    waiting = [s for s in sorted(spec.sizes, key=contract.size_key) if s not in started]
    if not waiting:
        return []
    size, seeds = waiting[0], spec.scan_seeds
    tokens = float(max(budgets(spec, size)))
    added = []
    for variant in spec.variants:
        arm = resolve_arm(variant)[0]
        plan = _plan(spec, frontiers, arm, size)
        if plan.lrs is not None:
            lo, hi = plan.law.interval(_num_params(spec, size))
            why = f"{LAW}: {arm} best LR at {size} in {fmt_lr(lo)}-{fmt_lr(hi)}"
            lrs = plan.lrs
        else:
            lrs = _grid(spec, arm, size)[0]
            why = f"{WAVE}: full grid" + (
                " (law broken)" if plan.broken else " (no law yet)" if plan.law is None else ""
            )
        added += [AddedLR(arm, size, tokens, float(f"{lr:.10g}"), seeds, round_, why) for lr in lrs]
    return added


def broken_laws(spec: StudySpec, frontiers: list[LRFrontier]) -> list[str]:
    """Why each arm's law was declared broken (for the state file and the report)."""
    top = max(spec.sizes, key=contract.size_key)
    out = []
    for arm in sorted({f.variant for f in frontiers}):
        plan = _plan(spec, frontiers, arm, top)
        if plan.broken is not None:
            out.append(plan.broken)
    return out
