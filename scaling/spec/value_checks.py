"""Checks of a study's raw values that need no other section: numbers that are not finite
anywhere in the file, and the keys and value types of the sections passed through to each
cell's run config (`model`, `schedule`, `optimizer`, `train`, `deepspeed`).

Part of `scaling.spec.checks.check_study` and of `scaling.spec.loader.study_from_dict`, which
reports them with the spec's other problems, all at once.
"""

from __future__ import annotations

import functools
import math
import typing

from jobs.config import DeepSpeedConfig, OptimizerConfig, ScheduleConfig, TrainConfig
from models.config import ModelConfig

__all__ = ["non_finite_problems", "section_key_problems"]


def non_finite_problems(data: object, where: str) -> list[str]:
    """Every `.inf` / `.nan` in the spec's mapping, by its dotted path: no field of a study
    means anything infinite, and a learning rate of `.inf` would only diverge every cell."""
    if isinstance(data, float) and not math.isfinite(data):
        return [f"{where}: {data} is not a finite number; give a finite value"]
    if isinstance(data, dict):
        return [q for k, v in data.items() for q in non_finite_problems(v, f"{where}.{k}")]
    if isinstance(data, list):
        return [q for i, v in enumerate(data) for q in non_finite_problems(v, f"{where}[{i}]")]
    return []


def _section_classes() -> dict[str, type]:

    return {
        "model": ModelConfig,
        "schedule": ScheduleConfig,
        "optimizer": OptimizerConfig,
        "train": TrainConfig,
        "deepspeed": DeepSpeedConfig,
    }


def section_key_problems(sections: dict) -> list[str]:
    """Unknown keys, and values of the wrong type, of the sections passed through to each
    cell's run config (`schedule`, `optimizer`, ...), read from the spec's mapping: found with
    the spec's other problems, not only once those are fixed and the cells are built (where
    a `warmup_steps: ""` would meet the branch arithmetic before the run config's check)."""
    problems = []
    for name, cls in _section_classes().items():
        section = sections.get(name)
        if not isinstance(section, dict):
            continue
        hints = typing.get_type_hints(cls)
        unknown = sorted(str(k) for k in section if k not in hints)
        if unknown:
            problems.append(
                f"study.{name}: unknown field(s) {', '.join(unknown)}; allowed: "
                f"{', '.join(sorted(hints))}"
            )
        for key, value in section.items():
            if key in hints and not _fits(hints[key], value):
                problems.append(f"study.{name}.{key}: {value!r}; give {_type_name(hints[key])}")
    return problems


@functools.cache
def _adapter(tp: object):
    from pydantic import TypeAdapter  # lazy: only when a study is checked

    return TypeAdapter(tp)


def _fits(tp: object, value: object) -> bool:
    from pydantic import ValidationError  # lazy: only when a study is checked

    try:
        _adapter(tp).validate_python(value)
    except ValidationError:
        return False
    return True


_NAMES = {int: "a whole number", float: "a number", str: "a string", bool: "true or false"}


def _type_name(tp: object) -> str:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    names = [_NAMES.get(a, getattr(a, "__name__", str(a))) for a in (args or [tp])]
    return " or ".join(names) + (" (or null)" if type(None) in typing.get_args(tp) else "")
