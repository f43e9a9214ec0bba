"""The import graph of each project package, read with ``ast`` (nothing is imported).

Per package: no cycle among its modules (imports at the top and inside functions alike), only
the packages below it imported (the layers of STYLE.md), and every import of a project module (its
own or another package's) inside a function carrying a comment that says why it is not at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# what each package may import from the others (STYLE.md, "The layers we want")
BELOW = {
    "foundation": set(),
    "models": {"foundation"},
    "data_prep": {"foundation"},
    "jobs": {"foundation", "models", "data_prep"},
    "analysis": {"foundation"},
    "scaling": {"foundation", "models", "data_prep", "jobs", "analysis"},
}
PACKAGES = list(BELOW)


def in_order(*rooms: str) -> dict[str, set[str]]:
    """Rooms in one line, lowest first: each may import every room before it."""
    return {room: set(rooms[:i]) for i, room in enumerate(rooms)}


# inside a package (or a sub-package, by its dotted name), the rooms (its sub-packages and top
# modules) each may import (docs/interfaces.md)
ROOMS_BELOW = {
    "analysis": {
        "tables": set(),
        "stats": {"tables"},
        "judgement": {"tables", "stats"},  # the builder of the `Judgement` they all take
        "report": {"tables", "stats", "judgement"},
        "synthetic": {"tables", "stats", "judgement"},
        "api": {"tables", "stats", "report", "judgement"},
        "cli": {"tables", "stats", "report", "judgement", "api"},
    },
    "jobs": {
        "engine_specs": set(),  # the registry of engines: names and builders (imported lazily)
        "config": {"engine_specs"},
        "engines": {"config", "engine_specs"},
        "telemetry": {"config"},
        "checkpoints": {"config", "engines"},
        "evaluation": {"config"},
        "loop": {"config", "engines", "telemetry", "checkpoints", "evaluation"},
        "faults": {"config", "telemetry"},  # how a known fault ends the job: for the entry points
        "launch": set(),  # whether a submitit executor started this process (`jobs.launch`)
        "job": {"config", "loop", "faults", "launch"},
        "cli": {"config", "loop", "faults"},
        "testing": {"config", "loop"},
        "__main__": {"cli", "faults"},
    },
    "analysis.stats": {
        **in_order(
            "lr",
            "variance",
            "fits",
            "gains",
            "planning",
            "rules",
            "axes",
            "backtest",
            "analyze",
            "looks",
            "resolve",
        ),
        "inference": set(),  # cost ratios: imports none of the others
    },
    "scaling": {
        # the study's state is one room (`state`) whose folder files (`state.files`: jobs.json,
        # lr_search.json, looks.json, ...) sit below the spec, which resolves a study's grid with
        # the cells its LR search and looks added; what every backend implements and the
        # registry of backends (`backends.base`), and a cell waiting in a submit
        # (`backends.queued`), sit below the spec (its `executor` type) and `state` (`status`)
        **in_order(
            "state.files",
            "backends.queued",
            "backends.base",
            "spec",
            "inference_cost",
            "state",
            "warmstart",
            "backends",
            "costs",
            "study_judgement",
            "lr_search",
            "looks",
            "driver",
            "study",  # `Study`: the study's one object, its verbs (`scaling.study`)
            "cli",
        ),
        "__main__": {"cli"},
    },
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules(package: str) -> dict[str, Path]:
    """Every module of ``package`` (dotted: ``analysis.stats``) by dotted name (a sub-package by
    its ``__init__``)."""
    return {module_name(p): p for p in sorted((ROOT / package.replace(".", "/")).rglob("*.py"))}


def in_function(tree: ast.Module) -> set[int]:
    """ids of the import nodes that sit inside a function (run on call, not on import)."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Import | ast.ImportFrom):
                    inside.add(id(sub))
    return inside


def targets(node: ast.Import | ast.ImportFrom, importer: str, is_init: bool, known: set[str]):
    """The dotted modules an import statement names: ``from a.b import c`` is ``a.b.c`` when
    that is a module of the package, else ``a.b``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:  # relative: resolved against the importer's package
        package = importer.split(".") if is_init else importer.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join(package + ([base] if base else []))
    named = [f"{base}.{alias.name}" for alias in node.names]
    return [name if name in known else base for name in named]


def imports_of(package: str):
    """(importer, target, line, inside a function, source lines, node) for every import of a
    module of ``package`` (a target is resolved against every module of its top package)."""
    modules = package_modules(package)
    known = set(package_modules(package.split(".")[0]))
    for importer, path in modules.items():
        source = path.read_text()
        tree = ast.parse(source, filename=str(path))
        inside = in_function(tree)
        lines = source.splitlines()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in targets(node, importer, path.name == "__init__.py", known):
                    yield importer, target, path, id(node) in inside, lines, node


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as ``[a, b, ..., a]``, or None: a depth-first search for a back edge."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def tangles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other round a cycle (strongly connected
    components of two or more), so a failure names every cycle's modules, not only the first."""
    reach = {node: _reachable(graph, node) for node in graph}
    groups = {frozenset(n for n in reach[node] if node in reach[n]) for node in graph}
    return sorted(sorted(g) for g in groups if len(g) > 1)


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def import_graph(package: str) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in package_modules(package)}
    for importer, target, *_ in imports_of(package):
        if target in graph and target != importer:
            graph[importer].add(target)
    return graph


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle(package: str) -> None:
    graph = import_graph(package)
    cycle = find_cycle(graph)
    groups = "\n".join(", ".join(g) for g in tangles(graph))
    assert cycle is None, (
        f"import cycle in {package}: {' -> '.join(cycle)}\nmodules on a cycle, by group:\n{groups}"
    )


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_only_the_layers_below(package: str) -> None:
    wrong = sorted(
        f"{path.relative_to(ROOT)}:{node.lineno} imports {target}"
        for _importer, target, path, _inside, _lines, node in imports_of(package)
        if target.split(".")[0] in BELOW
        and target.split(".")[0] != package
        and target.split(".")[0] not in BELOW[package]
    )
    assert not wrong, f"{package} may import only {sorted(BELOW[package])}:\n" + "\n".join(wrong)


def room_of(module: str, package: str) -> str | None:
    """The room of ``package`` that ``module`` is in (the next name below the package, or a
    dotted room such as ``state.files`` that the package lists), or None for the package itself
    and for modules outside it."""
    if not module.startswith(f"{package}."):
        return None
    name = module.removeprefix(f"{package}.")
    for room in ROOMS_BELOW.get(package, {}):
        if "." in room and (name == room or name.startswith(f"{room}.")):
            return room
    return name.split(".")[0]


@pytest.mark.parametrize("package", list(ROOMS_BELOW))
def test_rooms_import_only_the_rooms_below(package: str) -> None:
    rooms = ROOMS_BELOW[package]
    known = {room_of(m, package) for m in package_modules(package)} - {None}
    assert known == set(rooms), f"rooms of {package}: {sorted(known)}; listed: {sorted(rooms)}"
    wrong = sorted(
        {
            f"{path.relative_to(ROOT)}:{node.lineno} ({room}) imports {target}"
            for importer, target, path, _inside, _lines, node in imports_of(package)
            if (room := room_of(importer, package))
            and (to := room_of(target, package))
            and to != room
            and to not in rooms[room]
        }
    )
    assert not wrong, f"imports against {package}'s room order:\n" + "\n".join(wrong)


def has_comment(lines: list[str], node: ast.stmt) -> bool:
    """A comment on the line above the import (or above the block of imports it is part of),
    or at the end of one of its lines."""
    i = node.lineno - 2
    while i >= 0 and lines[i].strip().startswith(("from ", "import ")):
        i -= 1
    above = lines[i].strip() if i >= 0 else ""
    own = lines[node.lineno - 1 : node.end_lineno]
    return above.startswith("#") or any("#" in line for line in own)


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_inside_functions_say_why(package: str) -> None:
    silent = sorted(
        {
            f"{path.relative_to(ROOT)}:{node.lineno} imports {target}"
            for _importer, target, path, inside, lines, node in imports_of(package)
            if inside and target.split(".")[0] in BELOW and not has_comment(lines, node)
        }
    )
    assert not silent, (
        f"imports of the project's modules inside {package}'s functions need a comment saying why "
        "(on the line above or at the end of the line):\n" + "\n".join(silent)
    )


def test_a_cycle_is_found() -> None:
    """The search itself: a two-module cycle, a longer one, and none in a chain."""
    assert find_cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    two = {"a": {"b"}, "b": {"a", "c"}, "c": set(), "d": {"e"}, "e": {"d"}}
    assert tangles(two) == [["a", "b"], ["d", "e"]]
