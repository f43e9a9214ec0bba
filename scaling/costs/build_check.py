"""`plan`'s build check: each arm of the user's own built once, at the study's smallest size.

The built-in arms are held to their counts by the test suite (tests/models); an arm of the
user's own is built here, in a child process, before anything is submitted
(`models.build_check`).

The check is a pure function of the variant's code (`models.catalog.variants.code_digest`: the
`models` package and every module of the user's that defines the variant), the model config it
builds, and the torch and megatron-core versions. A study that passed it remembers that key in
its folder (`build_checks.json`, written by `submit` and `run`, read by every command), so the
next `run`, `submit`, `plan` or `pilot` of the same study with the same code does not build the
same model again (a child process and megatron's import, some 15 s of CPU each time). An edit
to any of that code, a new size or another torch is a new key, built and checked again; a
failure is never remembered.

A record is bound to what it certifies (issue 63): under its key it holds the variant, the
shape and the counts the build was held to (parameters, exactly as built; forward FLOPs per
token, within 2%). It is trusted only if the key is today's and those counts are what the
variant declares today; a list of bare keys (an older file), a record of other counts, or
anything else is absent, so the arm is built and checked again. The file cannot be made
tamper-proof against whoever can write the folder, but a record no longer certifies an arm
whose declared counts differ from the ones checked. A link, directory or FIFO at its name is
refused (`foundation.atomic.UnsafePath`, one line), never followed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from importlib import metadata
from pathlib import Path

from foundation.atomic import UnsafePath, read_bytes, write_text
from scaling.spec.resolved import ResolvedStudy

__all__ = ["BUILD_CHECKS", "check_arms_build"]

BUILD_CHECKS = "build_checks.json"  # in the study folder: the keys of the builds that passed
VERSION = 2  # 2: each key's record of what was checked (1: a list of bare keys)
_FIX = "remove it (`rm -r` for a directory); the next `run` or `submit` writes it again"


def _versions() -> str:
    found = []
    for dist in ("torch", "megatron-core"):
        try:
            found.append(f"{dist}=={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            found.append(f"{dist} absent")
    return ",".join(found)


def build_key(model) -> str:
    """What the check of `model` (a `models.ModelConfig`) depends on, as one digest."""
    from models.catalog.variants import code_digest  # lazy: the model stack

    config = dataclasses.asdict(model) if dataclasses.is_dataclass(model) else vars(model)
    text = json.dumps(
        {
            "code": code_digest(model.query_variant),
            "config": config,
            "versions": _versions(),
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()


def certified(model) -> dict:
    """What a passed build of `model` records under its key: its shape and the counts it was
    held to, as the variant declares them (`models.accounting`)."""
    from models.accounting import forward_flops_per_token, num_params  # lazy: the model stack

    return {
        "variant": model.query_variant,
        "num_layers": model.num_layers,
        "hidden_size": model.hidden_size,
        "num_params": num_params(model),  # == the built model's: the check holds it exactly
        "forward_flops_per_token": forward_flops_per_token(model),  # torch's, within 2%
    }


def _passed(folder: Path) -> dict[str, dict]:
    """key → record, as written by `check_arms_build`; {} if absent, damaged or another
    version (checked again). UnsafePath if it is not a regular file."""
    path = folder / BUILD_CHECKS
    try:
        data = read_bytes(path)
    except UnsafePath as err:
        raise UnsafePath(err.path, err.kind, _FIX) from None
    except OSError:
        return {}
    try:
        data = json.loads(data or b"null")  # not UTF-8: a ValueError too
        passed = data["passed"] if data["version"] == VERSION else {}
        return {k: r for k, r in passed.items() if isinstance(k, str) and isinstance(r, dict)}
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return {}  # unreadable: check again


def check_arms_build(study: ResolvedStudy, remember: bool = False) -> list[str]:
    """ValueError (naming the arm, its file and line or the count that differs) for the first
    arm of the user's own that does not build, or whose declared counts miss the built model;
    else one line per arm checked, saying what was checked (what `plan` prints). A build that
    passed for the same key before (`build_checks.json`) is not built again; `remember` (the
    commands that write the study folder) records the keys that pass."""
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
    passed = _passed(study.folder) if smallest else {}  # read only where it is used
    keys = {name: build_key(model) for name, (_, model, _) in smallest.items()}
    records = {name: certified(model) for name, (_, model, _) in smallest.items()}
    todo = [name for name in smallest if passed.get(keys[name]) != records[name]]
    problems = build_problems([(smallest[n][1], smallest[n][2]) for n in todo])
    for problem in problems:
        if problem is not None:
            raise ValueError(problem)
    if remember and todo and study.folder.is_dir():
        passed |= {keys[n]: records[n] for n in todo}
        data = {"version": VERSION, "passed": dict(sorted(passed.items()))}
        try:
            write_text(study.folder / BUILD_CHECKS, json.dumps(data, indent=1) + "\n")
        except UnsafePath as err:  # planted after the read
            raise UnsafePath(err.path, err.kind, _FIX) from None
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
