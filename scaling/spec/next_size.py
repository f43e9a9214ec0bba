"""One more size above a study's top, as the study's own rules make it: what `--resolve` buys
when its `size` option is chosen, and why a study cannot take one.

A new size is derived, never invented: its shape by the ladder rule (`ladder.head_dim`,
`ladder.aspect_ratio`; `scaling.spec.ladder.shape_for_size`), its tokens by
`tokens.tokens_per_param` (or the explicit branch counts), its batch by `batch.rule`, its
parallel layout by `parallel['*']`. The LRs it runs at come with the cells (the option's: each
arm's best LR carried up by the N^-1/3 law, on the arm's grid multiples), so `lr.grid` needs no
entry for it. The bought cells are `resolve.json`'s, expanded like the study's own
(`scaling.spec.grid.expand_cells`); the study file is not edited.

A study cannot take one (one line naming the field and the fix, `grow_problem`) when every
size has an explicit shape under `ladder.shapes` (the rule's shapes are another family), when
every size's tokens are given in `tokens.per_size` (the study has no rule for a new one), when
the rule's next shape is no larger than the top, or when the study's parallel layout does not
divide it.
"""

from __future__ import annotations

import dataclasses
import math

from foundation.contract import size_key, size_label
from scaling.spec.branches import budgets
from scaling.spec.ladder import Shape, nominal_params
from scaling.spec.resources import split_problems
from scaling.spec.study import StudySpec

__all__ = ["NextSize", "grow_problem", "next_size", "study_grow"]


@dataclasses.dataclass(frozen=True)
class NextSize:
    label: str
    shape: Shape
    nominal: int  # 12 L d^2 of its shape
    tokens: float  # its token budget (the largest, with WSD branches)
    n_ratio: float  # nominal N over the top's
    tokens_ratio: float  # tokens over the top's

    @property
    def words(self) -> str:
        s = self.shape
        return f"{s.num_layers} layers x {s.hidden_size} hidden, {self.tokens:.3g} tokens"


def next_size(spec: StudySpec, top: str, ratio: float) -> NextSize | str:
    """The size ``ratio`` x the nominal N of ``top`` by the study's rules, or why there is none
    (one line naming the field and the fix)."""
    leave = "or leave size out of --options"
    if spec.sizes and all(s in spec.ladder.shapes for s in spec.sizes):
        return (
            "study.ladder.shapes gives every size's shape, so a new size by the ladder rule "
            f"(head_dim {spec.ladder.head_dim}, aspect {spec.ladder.aspect_ratio:g}) would be "
            "another family; add the size to sizes with its shape, tokens and LRs yourself, "
            f"{leave}"
        )
    explicit_counts = bool(spec.tokens.branches) and all(b > 1 for b in spec.tokens.branches)
    by_size = all(s in spec.tokens.per_size for s in spec.sizes)
    if not explicit_counts and (spec.tokens.tokens_per_param is None or by_size):
        return (
            "study.tokens.per_size gives each size's tokens, so a new size's budget is not "
            f"the study's rule; give its sizes by tokens.tokens_per_param instead, {leave}"
        )
    top_n = nominal_params(spec.shape(top))
    label = size_label(top_n * ratio)
    try:
        shape = spec.shape(label)
    except ValueError as err:
        return f"study.ladder: {err}"
    nominal = nominal_params(shape)
    if nominal <= top_n or label in spec.sizes:
        return (
            f"study.ladder: the rule's shape for {label} ({shape.num_layers} layers x "
            f"{shape.hidden_size}) is no larger than the top size {top}; {leave}"
        )
    problems = split_problems(spec, label)
    if problems:
        return problems[0]
    tokens = max(budgets(spec, label))  # the largest budget: explicit branch counts included
    top_tokens = max(budgets(spec, top))
    return NextSize(label, shape, nominal, tokens, nominal / top_n, tokens / top_tokens)


def study_top_ratio(spec: StudySpec) -> tuple[str, float]:
    """The study's top size and its ladder's ratio (top over the next below; 2 with one size)."""
    sizes = sorted(spec.sizes, key=size_key)
    top = sizes[-1]
    if len(sizes) < 2:
        return top, 2.0
    return top, nominal_params(spec.shape(top)) / nominal_params(spec.shape(sizes[-2]))


def grow_problem(spec: StudySpec) -> str | None:
    """Why the study cannot take one more size at its ladder's ratio, or None."""
    found = next_size(spec, *study_top_ratio(spec))
    return found if isinstance(found, str) else None


def study_grow(spec: StudySpec):
    """``grow(top, ratio) -> (label, N ratio, tokens ratio, words) | None`` for
    ``analysis.stats.resolve.options.price``: the study's next size relative to ``top``."""

    def grow(top: str, ratio: float) -> tuple[str, float, float, str] | None:
        if not (math.isfinite(ratio) and ratio > 1):
            return None
        found = next_size(spec, top, ratio)
        if isinstance(found, str):
            return None
        return found.label, found.n_ratio, found.tokens_ratio, found.words

    return grow
