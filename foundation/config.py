"""Config dataclasses in and out: dict/YAML/JSON in, validated dataclass out, and back.

Every config of the project (model, data, run, study) is a dataclass of simple types. Types,
unknown keys and missing fields are checked by pydantic v2 (a `TypeAdapter` per class); each
dataclass's own `validate()` then checks what spans fields. Both report *every* problem of a
mapping at once, each named by its full dotted path (``study.data.prepare.vocab_size``) with the
fix, because a spec with four mistakes should not need four runs to surface them.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

import yaml

from foundation.atomic import write_text
from foundation.secrets import mask_userinfo
from foundation.type_errors import type_problems
from foundation.yaml_guard import (
    MAX_YAML_DEPTH,
    DuplicateKey,
    TooLarge,
    UniqueKeyLoader,
    check_depth,
    syntax_error,
    unique_pairs,
)

T = TypeVar("T")

__all__ = [
    "ConfigError",
    "Problems",
    "from_dict",
    "to_dict",
    "flatten",
    "load_file",
    "dump_file",
    "field_docs",
]


class ConfigError(ValueError):
    """Invalid config values; the message names each field and its fix, one problem a line.

    Every problem has any `user:password@` masked (`foundation.secrets.mask_userinfo`): a
    message may quote a URI or a line of the file, and is printed and logged.
    """

    def __init__(self, problems: str | Iterable[str]) -> None:
        problems = [problems] if isinstance(problems, str) else list(problems)
        self.problems = [mask_userinfo(p) for p in problems]
        super().__init__("\n".join(self.problems))

    def prefixed(self, prefix: str) -> ConfigError:
        """The same problems, each preceded by `prefix` (a file name)."""
        return ConfigError(f"{prefix}: {p}" for p in self.problems)


def seconds_from_env(name: str, default: float, what: str, *, positive: bool = False) -> float:
    """A duration in seconds from the environment variable `name`, else `default`. A value that
    is not a number, negative (or with `positive`, zero or infinite) is a `ConfigError` naming
    the variable, `what` it sets and its default."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (0 < value < math.inf if positive else value >= 0):  # NaN fails both
        kind = "a positive number" if positive else "a number"
        raise ConfigError(
            f"{name}={raw!r}: not {kind} of seconds; set it to {what} (default {default:g}), "
            "or unset it"
        )
    return value


class Problems:
    """Collects problems so a check reports all of them, then raises one ConfigError."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, message: str) -> None:
        self.items.append(message)

    def extend(self, err: ConfigError) -> None:
        self.items.extend(err.problems)

    def __bool__(self) -> bool:
        return bool(self.items)

    def raise_if_any(self) -> None:
        if self.items:
            raise ConfigError(self.items)


@functools.cache
def _model(cls: type) -> Any:
    """A pydantic model with one field of type `cls`: its config (unknown keys are errors)
    reaches every nested stdlib dataclass, which a bare TypeAdapter would not forbid."""
    from pydantic import ConfigDict, create_model

    return create_model(
        f"{cls.__name__}Root", __config__=ConfigDict(extra="forbid"), root=(cls, ...)
    )


def _at_field(obj: Any, where: str, message: str) -> str:
    """``where: message``, or ``where.field: rest`` when the message starts with a field name."""
    head, sep, rest = message.partition(": ")
    if sep and head in {f.name for f in dataclasses.fields(obj)}:
        return f"{where}.{head}: {rest}"
    return f"{where}: {message}"


def _validate_tree(obj: Any, where: str, problems: list[str]) -> bool:
    """Run every nested dataclass's `validate()` (children first); True if all passed.

    A parent's cross-field checks are skipped when a child failed: they would only repeat it.
    """
    ok = True
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            ok &= _validate_tree(getattr(obj, f.name), f"{where}.{f.name}", problems)
        validate = getattr(obj, "validate", None)
        if ok and callable(validate):
            try:
                validate()
            except ConfigError as err:
                problems.extend(err.problems)
                ok = False
            except ValueError as err:
                problems.append(_at_field(obj, where, str(err)))
                ok = False
    elif isinstance(obj, list | tuple):
        for i, item in enumerate(obj):
            ok &= _validate_tree(item, f"{where}[{i}]", problems)
    elif isinstance(obj, dict):
        for key, item in obj.items():
            ok &= _validate_tree(item, f"{where}.{key}", problems)
    return ok


def from_dict(cls: type[T], data: Any, where: str = "config", tree: bool = True) -> T:
    """Build dataclass `cls` from a mapping; raise one ConfigError listing every problem.

    Types are coerced as YAML needs (``"3e-4"`` → float, ``4.0`` → int); unknown fields, wrong
    types and missing fields are named by their dotted path below `where`, then each nested
    dataclass's `validate()` runs so cross-field constraints are checked at the same boundary.
    `tree=False`: only the top object's `validate()`, for a mapping whose nested sections were
    validated before in another that differs from it only in top-level fields (a study's
    seeds of one cell: `scaling.spec.grid.expand_cells`).
    """
    from pydantic import ValidationError

    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping of fields, got {type(data).__name__}")
    try:
        obj = _model(cls).model_validate({"root": data}).root
    except ValidationError as err:
        errors = [{**e, "loc": e["loc"][1:]} for e in err.errors()]  # drop the "root" step
        raise ConfigError(type_problems(cls, errors, data, where)) from None
    problems: list[str] = []
    if tree:
        _validate_tree(obj, where, problems)
    elif callable(getattr(obj, "validate", None)):
        try:
            obj.validate()
        except ValueError as err:
            problems.append(_at_field(obj, where, str(err)))
    if problems:
        raise ConfigError(problems)
    return obj


def to_dict(obj: Any) -> Any:
    """Plain-data form of a config (dataclasses → dicts, tuples → lists, Paths → str)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, list | tuple):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    if isinstance(obj, Path):
        return str(obj)
    return obj


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``; used for MLflow params."""
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        data = to_dict(data)
    out: dict[str, Any] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    out[prefix.rstrip(".")] = data
    return out


def load_file(path: str | Path) -> dict:
    """Read a YAML or JSON mapping; a missing or malformed file raises ConfigError naming it.

    A key given twice in one mapping is refused, naming both lines.
    """
    path = Path(path)
    try:
        if not path.is_file():
            raise ConfigError(f"{path}: no such file; pass the path of a YAML or JSON config")
        raw = path.read_bytes()
    except OSError as err:  # a name too long, a folder without read permission
        raise ConfigError(f"{path}: cannot read it ({err.strerror}); fix the path") from None
    try:
        text = raw.decode("utf-8")  # a binary file (a checkpoint, an image) is not a config
        if path.suffix == ".json":
            data = json.loads(text, object_pairs_hook=unique_pairs)
        else:
            check_depth(text)  # before the recursive composer, which would take seconds
            data = yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except (DuplicateKey, TooLarge) as err:
        raise ConfigError(f"{path}: {err}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"{path}: not a text file (byte {err.start} is not UTF-8); pass the YAML or JSON "
            "config, saved as UTF-8"
        ) from None
    except RecursionError:  # the parser's own stack, before `foundation.yaml_guard` could count
        raise ConfigError(
            f"{path}: values nest too deeply to read (over {MAX_YAML_DEPTH} levels); a config "
            "nests a few: fix its brackets or indentation"
        ) from None
    except (yaml.YAMLError, json.JSONDecodeError) as err:
        kind = "JSON" if path.suffix == ".json" else "YAML"
        raise ConfigError(
            f"{path}: not valid {kind} ({syntax_error(err)}); fix the syntax there"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: expected a mapping of fields at the top level, got "
            f"{type(data).__name__}; write `name: ...`, `sizes: ...` and so on"
        )
    return data


def dump_file(obj: Any, path: str | Path) -> None:
    """Write a config as YAML or JSON (by suffix), atomically."""
    path = Path(path)
    data = to_dict(obj)
    text = (
        json.dumps(data, indent=2, sort_keys=True)
        if path.suffix == ".json"
        else yaml.safe_dump(data, sort_keys=False)
    )
    write_text(path, text)


def _type_label(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return " | ".join(repr(a) for a in get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_label(a) for a in get_args(tp))
    if origin is not None:
        inner = ", ".join(_type_label(a) for a in get_args(tp))
        return f"{origin.__name__}[{inner}]"
    return "null" if tp is type(None) else getattr(tp, "__name__", str(tp))


def field_docs(cls: type) -> list[tuple[str, str, str]]:
    """(name, type, default) of each field of dataclass `cls`: the schema that docs list."""
    hints = get_type_hints(cls)
    rows = []
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            default = repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = repr(to_dict(f.default_factory()))
        else:
            default = "required"
        rows.append((f.name, _type_label(hints[f.name]), default))
    return rows
