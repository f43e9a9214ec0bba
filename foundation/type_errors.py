"""pydantic's validation errors as the problem lines of a `ConfigError`.

Each line names the field by its dotted path below `where` (`study.seeds[1]`) and says what was
expected and what was given; unknown keys list the allowed ones and the one a typo was close to;
a union field (`seeds: list[int] | SeedRounds`) is reported for the form the value was meant as.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from typing import Any, get_args, get_origin, get_type_hints

__all__ = ["type_problems"]


def type_problems(cls: type, errors: list[dict], data: Any, where: str) -> list[str]:
    """The problem lines of pydantic `errors` (locations below the root) for `data` as `cls`."""
    return _type_problems(cls, _one_member(cls, errors, data), where)


def _loc_path(where: str, loc: tuple) -> str:
    path = where
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _field_type(tp: Any, part: Any) -> Any:
    """The type one step into `tp` along a pydantic error location (None when unknown)."""
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        for arg in get_args(tp):
            found = _field_type(arg, part)
            if found is not None:
                return found
        return None
    if dataclasses.is_dataclass(tp):
        return get_type_hints(tp).get(part)
    if origin in (list, tuple, dict):
        return get_args(tp)[-1] if get_args(tp) else Any
    return None


def _class_at(cls: type, loc: tuple) -> Any:
    tp: Any = cls
    for part in loc:
        tp = _field_type(tp, part)
        if tp is None:
            return None
    if get_origin(tp) in (typing.Union, types.UnionType):
        tp = next((a for a in get_args(tp) if dataclasses.is_dataclass(a)), tp)
    return tp


def _is_class(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _member_label(tp: Any) -> str:
    """How pydantic names a union member in an error's location (`list[int]`, `SeedRounds`)."""
    return tp.__name__ if isinstance(tp, type) else str(tp)


def _kind(tp: Any) -> str:
    """`mapping`, `list` or `scalar`: what a YAML value must be to be this type."""
    origin = get_origin(tp) or tp
    if _is_class(tp) or origin is dict:
        return "mapping"
    return "list" if origin in (list, tuple) else "scalar"


def _union_at(cls: type, loc: tuple) -> tuple[int, dict[str, Any]] | None:
    """(index in `loc` of the first union member's label, {label: member}), or None."""
    tp: Any = cls
    for i, part in enumerate(loc):
        if get_origin(tp) in (typing.Union, types.UnionType):
            members = {_member_label(a): a for a in get_args(tp) if a is not type(None)}
            if part in members:
                return i, members
        tp = _field_type(tp, part)
        if tp is None:
            return None
    return None


def _one_member(cls: type, errors: list[dict], data: Any) -> list[dict]:
    """A union field's errors for the member the value was meant as, without its label.

    pydantic reports a value that fits no member of `list[int] | SeedRounds` once per member
    (`seeds.list[int]: ...` and `seeds.SeedRounds: ...`); a mapping was meant as the mapping
    member, a list as the list one. A value of neither kind gets one line naming the kinds."""
    out, seen = [], set()
    for err in errors:
        found = _union_at(cls, err["loc"])
        if found is None:
            out.append(err)
            continue
        i, members = found
        value = data
        for part in err["loc"][:i]:
            value = value[part] if isinstance(value, dict | list) else None
        kind = (
            "mapping"
            if isinstance(value, dict)
            else "list"
            if isinstance(value, list)
            else "scalar"
        )
        meant = [label for label, tp in members.items() if _kind(tp) == kind]
        if len(meant) == 1:
            if err["loc"][i] == meant[0]:
                out.append({**err, "loc": err["loc"][:i] + err["loc"][i + 1 :]})
        elif err["loc"][:i] not in seen:
            seen.add(err["loc"][:i])
            kinds = sorted({_kind(tp) for tp in members.values()})
            shown = f"{type(value).__name__} {value!r}"
            out.append(
                {
                    "type": "union",
                    "loc": err["loc"][:i],
                    "msg": f"expected {' or '.join('a ' + k for k in kinds)}, got {shown}",
                }
            )
    return out


_EXPECTED = {
    "int": "an integer",
    "float": "a number",
    "bool": "true/false",
    "string": "a string",
    "list": "a list",
    "tuple": "a list",
    "dict": "a mapping",
    "dataclass": "a mapping of fields",
}


def _message(err: dict) -> str:
    kind, value = err["type"], err.get("input")
    if kind == "missing":
        return "required field is missing; set it"
    if kind == "literal_error":
        allowed = err.get("ctx", {}).get("expected", "").replace(" or ", ", ")
        return f"{value!r} is not one of {allowed}"
    family = kind.split("_")[0]
    if family in _EXPECTED:
        shown = type(value).__name__ if family in ("list", "tuple", "dict", "dataclass") else ""
        return f"expected {_EXPECTED[family]}, got {shown} {value!r}".replace("  ", " ")
    return err["msg"]


def _type_problems(cls: type, errors: list[dict], where: str) -> list[str]:
    problems, unknown = [], {}
    for err in errors:
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function")))
        if err["type"] in ("unexpected_keyword_argument", "extra_forbidden"):
            unknown.setdefault(loc[:-1], []).append(str(loc[-1]))
            continue
        problems.append(f"{_loc_path(where, loc)}: {_message(err)}")
    for parent, names in unknown.items():
        target = _class_at(cls, parent)
        allowed = [f.name for f in dataclasses.fields(target)] if _is_class(target) else []
        hint = f"; allowed: {', '.join(sorted(allowed))}" if allowed else ""
        problems.append(
            f"{_loc_path(where, parent)}: unknown field(s) {', '.join(sorted(names))}"
            f"{_did_you_mean(names, allowed)}{hint}"
        )
    return problems


def _did_you_mean(names: list[str], allowed: list[str]) -> str:
    """`; did you mean seeds?` for each unknown name close to an allowed one (a typo)."""
    guesses = []
    for name in sorted(names):
        close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.75)
        if close:
            guesses.append(f"{close[0]} (for {name})" if len(names) > 1 else close[0])
    return f"; did you mean {', '.join(guesses)}?" if guesses else ""
