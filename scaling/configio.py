"""Serialisable config dataclasses: dict/YAML/JSON in, validated dataclass out, and back.

Every config in the project (model, data, run, study) is a dataclass of simple types. This module
is the one place that turns untrusted dicts into them, so every error names the offending field
by its dotted path (``run.model.hidden_size``) and says what would be accepted.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

import yaml

T = TypeVar("T")

__all__ = ["ConfigError", "from_dict", "to_dict", "flatten", "load_file", "dump_file"]


class ConfigError(ValueError):
    """A config value is invalid; the message names the field and the fix."""


def _type_name(tp: Any) -> str:
    if get_origin(tp) is Literal:
        return " | ".join(repr(a) for a in get_args(tp))
    return getattr(tp, "__name__", str(tp))


def _convert(value: Any, tp: Any, where: str) -> Any:
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(value, arg, where)
            except ConfigError as err:
                errors.append(str(err))
        raise ConfigError(
            errors[0]
            if len(errors) == 1
            else f"{where}: {value!r} matches none of {', '.join(_type_name(a) for a in args)}"
        )
    if origin is Literal:
        allowed = get_args(tp)
        if value not in allowed:
            raise ConfigError(f"{where}: {value!r} is not one of {', '.join(map(repr, allowed))}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__} {value!r}")
        args = get_args(tp)
        item_tp = args[0] if args else Any
        items = [_convert(v, item_tp, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
        key_tp, val_tp = get_args(tp) or (Any, Any)
        return {
            _convert(k, key_tp, f"{where}.{k}"): _convert(v, val_tp, f"{where}.{k}")
            for k, v in value.items()
        }
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        return from_dict(tp, value, where)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true/false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            if isinstance(value, str):
                try:  # YAML 1.1 reads "3e-4" as a string
                    return float(value)
                except ValueError:
                    pass
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    return value


def from_dict(cls: type[T], data: Any, where: str = "config") -> T:
    """Build dataclass ``cls`` from a mapping; unknown or mistyped fields raise ConfigError.

    After construction, the dataclass's own ``validate()`` (if any) runs, so cross-field
    constraints are checked at the same boundary.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping of fields, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"{where}: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(fields))}"
        )
    hints = get_type_hints(cls)
    kwargs = {}
    for name, field in fields.items():
        if name in data:
            kwargs[name] = _convert(data[name], hints[name], f"{where}.{name}")
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{where}.{name}: required field is missing")
    obj = cls(**kwargs)
    validate = getattr(obj, "validate", None)
    if callable(validate):
        try:
            validate()
        except ConfigError:
            raise
        except ValueError as err:
            raise ConfigError(f"{where}: {err}") from err
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
    """Read a YAML or JSON mapping; a missing or malformed file raises ConfigError naming it."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such file; pass the path of a YAML or JSON config")
    try:
        text = path.read_text()
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: not valid YAML/JSON ({err})") from err
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
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
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)
