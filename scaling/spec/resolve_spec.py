"""`resolve:` in a study file: the most `scaling run STUDY --resolve` may buy, declared with the
study before any extension (docs/studies.md, "Resolving an open question").

    resolve: {budget: 0.5, max_looks: 4, options: [seeds, lr_grid]}

The flags `--budget`, `--max-looks` and `--options` override each field; `resolve.json` records
the plan the first extension was bought under, and a later call with another is refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["ResolveSpec", "RESOLVE_KINDS", "NO_BUDGET", "with_study_file"]

# what --resolve can buy: cells of the study's own ladder, one more size by its rules
# (`scaling.spec.next_size`) and longer training at the top where it has a tokens axis (by
# default each only where the study can take it)
RESOLVE_KINDS = ("seeds", "lr_grid", "lr_edge", "size", "tokens")
NO_BUDGET = (
    "--resolve: give --budget HOURS, the device-hours it may spend (e.g. --budget 0.5), or "
    "declare it in the study file (`resolve: {budget: 0.5}`)"
)


@dataclass
class ResolveSpec:
    """`budget`: device-hours (CPU-hours where the study runs on CPUs), as the plan prices a
    cell; `max_looks`: extensions at most; `options`: the kinds it may buy. A field left out is
    as a flag not given: resolve.json's declared plan, else the resolve's default."""

    budget: float
    max_looks: int | None = None
    options: list[str] | None = None

    def validate(self) -> None:
        if not (math.isfinite(self.budget) and self.budget > 0):
            raise ValueError(
                f"budget {self.budget:g}: give the device-hours the resolve may spend, a positive "
                "number (e.g. budget: 0.5)"
            )
        if self.max_looks is not None and self.max_looks < 1:
            raise ValueError(f"max_looks {self.max_looks}: give at least 1 extension (e.g. 4)")
        if self.options is not None and (
            not self.options or any(k not in RESOLVE_KINDS for k in self.options)
        ):
            raise ValueError(
                f"options {self.options}: name one or more of {', '.join(RESOLVE_KINDS)}"
            )


def with_study_file(declared: ResolveSpec | None, budget, max_looks, kinds) -> tuple:
    """(budget, max_looks, kinds): each flag given, else the study file's `resolve:` field, else
    None (the budget then has to be given; the others have defaults)."""
    if declared is None:
        return budget, max_looks, kinds
    options = None if declared.options is None else tuple(declared.options)
    return (
        declared.budget if budget is None else budget,
        declared.max_looks if max_looks is None else max_looks,
        options if kinds is None else kinds,
    )
