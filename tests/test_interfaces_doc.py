"""docs/interfaces.md is the contract between the packages: every project name it cites exists.

A name is a backticked dotted path that starts with one of the project's packages
(`models.build_gpt`, `foundation.contract.TAG_FLOPS_COUNTED`); MLflow tag names and file names
are left out. It is resolved by importing the longest module prefix and reading the rest as
attributes. A renamed or deleted function then fails here, not in a reader's hands.

A cited name written with its parameters (`analysis.lr_frontier(table, *, step_factor=None)`)
must also take every parameter it is written with: a renamed parameter fails here too. `...`,
`*` and `/` are notation, and a `**kwargs` of the real signature takes any name. A short name
written with parameters beside its module (`load_file(path)` under `foundation.config`) must fit
at least one function or method of that name in the modules the contract cites: a looser check,
since the doc does not say which module it means.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "interfaces.md"
PACKAGES = ("foundation", "models", "jobs", "data_prep", "scaling", "analysis")
NAME = re.compile(r"`((?:" + "|".join(PACKAGES) + r")(?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
CALL = re.compile(r"`((?:" + "|".join(PACKAGES) + r")(?:\.[A-Za-z_][A-Za-z0-9_]*)+)\(([^`]*)`")
SHORT_CALL = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)\(([^`]*)`")
PARAM = re.compile(r"\*{0,2}([A-Za-z_][A-Za-z0-9_]*)\s*(?:[:=].*)?", re.DOTALL)


def not_code() -> set[str]:
    """Cited strings that are not Python names: the MLflow tags the contract defines
    (`scaling.role` is the value of `foundation.contract.TAG_ROLE`)."""
    from foundation import contract

    return {v for k, v in vars(contract).items() if k.startswith("TAG_") and isinstance(v, str)}


def cited_names() -> list[str]:
    names = set(NAME.findall(DOC.read_text())) - not_code()
    return sorted(n for n in names if not n.endswith((".json", ".yaml", ".py", ".md")))


def resolve(name: str) -> object:
    """The object `name` denotes: the longest importable module prefix, then attributes."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)  # AttributeError: the doc cites what is not there
        return obj
    raise ModuleNotFoundError(name)


def test_every_name_the_contract_cites_exists():
    names = cited_names()
    assert len(names) > 50, names  # the pattern still finds the doc's names
    missing = []
    for name in names:
        try:
            resolve(name)
        except (ModuleNotFoundError, AttributeError) as err:
            missing.append(f"`{name}` ({err})")
    assert not missing, "docs/interfaces.md cites names that do not exist:\n" + "\n".join(missing)


def split_top(text: str) -> list[str] | None:
    """The parameters of `text` (what follows a call's opening bracket) up to its closing
    bracket, split at the commas outside brackets and quotes; None if it does not close."""
    parts, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == ")":
            if depth == 0:
                parts.append(text[start:i])
                return [p.strip() for p in parts if p.strip()]
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return None


def parameter_names(args: str) -> list[str] | None:
    """The names of the parameters a call is written with; None if one cannot be read."""
    names = []
    for arg in split_top(args) or []:
        if arg in ("...", "*", "/"):
            continue
        match = PARAM.fullmatch(arg)
        if match is None:
            return None
        names.append(match.group(1))
    return names


def cited_calls() -> list[tuple[str, list[str]]]:
    """(name, parameter names) for every cited name written with its parameters."""
    calls = []
    for name, args in CALL.findall(DOC.read_text()):
        params = parameter_names(args)
        assert params is not None, f"`{name}({args}`: cannot read its parameters"
        calls.append((name, params))
    return calls


def takes(func: object, params: list[str]) -> bool:
    """Whether `func` has a parameter of each name (any name, with a `**kwargs`)."""
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return True  # no signature to read (a builtin)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values()):
        return True
    return all(p in sig.parameters for p in params)


def cited_modules() -> list[object]:
    """The modules the contract's names lie in."""
    modules = {}
    for name in cited_names():
        try:
            obj = resolve(name)
        except (ModuleNotFoundError, AttributeError):
            continue  # the name test reports it
        module = obj if inspect.ismodule(obj) else inspect.getmodule(obj)
        if module is not None:
            modules[module.__name__] = module
    return list(modules.values())


def same_named(name: str, modules: list[object]) -> list[object]:
    """The callables `name` (`f` or `Class.method`) may denote in `modules`: module functions
    and classes, and the methods of the classes each module defines."""
    first, *rest = name.split(".")
    found = []
    for module in modules:
        owners = [module] + [
            c
            for c in vars(module).values()
            if inspect.isclass(c) and c.__module__ == module.__name__
        ]
        for owner in owners:
            obj = vars(owner).get(first)
            for attr in rest:
                obj = getattr(obj, attr, None)
            obj = getattr(obj, "__func__", obj)  # a staticmethod or classmethod
            if callable(obj) and all(obj is not f for f in found):
                found.append(obj)
    return found


def test_every_parameter_the_contract_cites_exists():
    calls = cited_calls()
    assert len(calls) > 20, calls  # the pattern still finds the doc's signatures
    wrong = []
    for name, params in calls:
        try:
            func = resolve(name)
        except (ModuleNotFoundError, AttributeError):
            continue  # the name test reports it
        if not takes(func, params):
            wrong.append(f"`{name}({', '.join(params)})`: the code has {inspect.signature(func)}")
    assert not wrong, "docs/interfaces.md cites parameters that do not exist:\n" + "\n".join(wrong)


def test_every_short_signature_fits_a_cited_module():
    modules = cited_modules()
    checked, wrong = 0, []
    for name, args in SHORT_CALL.findall(DOC.read_text()):
        params = parameter_names(args)
        if name.split(".")[0] in PACKAGES or params is None:
            continue  # a dotted name (the test above), or prose such as `ValueError(f(...))`
        funcs = same_named(name, modules)
        if not funcs:
            continue  # a name the cited modules do not define (`GPTModel`, `ValueError`)
        checked += 1
        if not any(takes(f, params) for f in funcs):
            sigs = "; ".join(str(inspect.signature(f)) for f in funcs)
            wrong.append(f"`{name}({', '.join(params)})`: the code has {sigs}")
    assert checked > 100, checked  # the pattern still finds the doc's signatures
    assert not wrong, "docs/interfaces.md cites parameters that do not exist:\n" + "\n".join(wrong)
