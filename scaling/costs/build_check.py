"""`plan`'s build check: each arm of the user's own built once, at the study's smallest size.

The built-in arms are held to their counts by the test suite (tests/models); an arm of the
user's own is built here, in a child process, before anything is submitted
(`models.build_check`).
"""

from __future__ import annotations

from scaling.spec.resolved import ResolvedStudy

__all__ = ["check_arms_build"]


def check_arms_build(study: ResolvedStudy) -> list[str]:
    """ValueError (naming the arm, its file and line or the count that differs) for the first
    arm of the user's own that does not build, or whose declared counts miss the built model;
    else one line per arm checked, saying what was checked (what `plan` prints)."""
    from models.accounting import num_params  # lazy: the model stack, only when planning
    from models.build_check import build_problems  # lazy: the model stack, only when planning
    from models.catalog.variants import (  # lazy: the model stack, only when planning
        is_builtin,
        load_variant,
    )

    smallest: dict[str, tuple[int, object, str]] = {}
    for cell in study.cells:
        model = cell.run.model
        if is_builtin(model.query_variant):
            continue
        count = num_params(model)
        if model.query_variant not in smallest or count < smallest[model.query_variant][0]:
            smallest[model.query_variant] = (count, model, cell.variant)
    problems = build_problems([(model, arm) for _, model, arm in smallest.values()])
    for problem in problems:
        if problem is not None:
            raise ValueError(problem)
    lines = []
    for name, (count, model, arm) in smallest.items():
        flops = (
            "its forward FLOPs per token within 2% of torch's counter"
            if load_variant(name).flops is not None
            else "its FLOPs not checked (none declared)"
        )
        lines.append(
            f"variant {arm!r} built and checked ({model.num_layers} layers, d={model.hidden_size}"
            f"): {count:,} parameters as declared, {flops}"
        )
    return lines
