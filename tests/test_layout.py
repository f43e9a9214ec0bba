"""The tests mirror the packages: `scaling/lr_search/`'s tests are in `tests/scaling/lr_search/`.

A newcomer looks for a module's tests at the module's own path; a folder named by history
(`rounds/search/`, `state/jobs/`) hides them. The few folders that cut across packages are named
here, each with what it holds.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ACROSS = {
    "tests/reliability": "faults that cross packages: killed nodes, lost stores, damaged files",
    "tests/scaling/e2e": "whole studies trained through the `scaling` CLI",
    "tests/scaling/spec/bad_input": "refusals of bad study files, one behaviour per module",
    "tests/variants": "variant modules that the tests load as a user's own code",
}


def test_every_test_folder_mirrors_a_package() -> None:
    folders = sorted(
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "tests").rglob("*")
        if p.is_dir() and p.name != "__pycache__" and not p.name.startswith(".")
    )
    astray = [
        f for f in folders if f not in ACROSS and not (ROOT / f.removeprefix("tests/")).is_dir()
    ]
    assert not astray, (
        "test folders without a package of the same path (move them to mirror the package they "
        f"test, or name them in ACROSS with what they hold): {astray}"
    )
    assert all((ROOT / f).is_dir() for f in ACROSS), "a folder in ACROSS no longer exists"


# modules still over the bound, each to be split by the refactor that owns it (issue 60); none
# may be added
KNOWN_LONG: set[str] = set()


def test_every_module_of_scaling_stays_under_400_lines() -> None:
    """A module a reader takes in at one sitting (STYLE.md): every module of `scaling/` stays
    under 400 lines (issues 50, 60); one over it is split by job, in its own room."""
    long = {
        path.relative_to(ROOT).as_posix(): lines
        for path in sorted((ROOT / "scaling").rglob("*.py"))
        if (lines := path.read_text().count("\n")) >= 400
    }
    assert sorted(set(long) - KNOWN_LONG) == [], f"split these by job: {long}"
    assert KNOWN_LONG <= set(long), "split now: drop it from KNOWN_LONG"


PACKAGES = ("foundation", "models", "jobs", "data_prep", "scaling", "analysis")
# private names still imported across modules, each to be made public by the refactor that owns
# its package (issue 60); none may be added
KNOWN_PRIVATE_IMPORTS: set[str] = set()


def _private_imports(path: Path) -> list[str]:
    """`from pkg.mod import _name` and `mod._name` (mod a project module imported by name) in
    the module at `path`. A private module imported from its own package is its package's
    business (`from models import _cpu_adapter` in `models/runtime.py`)."""
    import ast

    def is_module(dotted: str) -> bool:
        base = ROOT / dotted.replace(".", "/")
        return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()

    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__")

    own_package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    tree = ast.parse(path.read_text())
    hits, modules = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.split(".")[0] not in PACKAGES:
                continue
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                if is_module(dotted):
                    modules.add(alias.asname or alias.name)
                    if private(alias.name) and not own_package.startswith(node.module):
                        hits.append(dotted)
                elif private(alias.name):
                    hits.append(dotted)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name.split(".")[0] in PACKAGES:
                    modules.add(alias.asname)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and private(node.attr)
        ):
            hits.append(f"{node.value.id}.{node.attr}")
    return [f"{path.relative_to(ROOT)}: {hit}" for hit in hits]


def test_no_module_imports_a_private_name_of_another() -> None:
    """What modules share is public: a `_name` is its module's own. A command that needs another
    command's helper finds it public in one shared module (`scaling.cli.terminal`), not as
    `from scaling.cli.commands import _load` (issue 60: five CLI modules imported 13 of them)."""
    hits = {
        hit
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for hit in _private_imports(path)
    }
    assert sorted(hits - KNOWN_PRIVATE_IMPORTS) == []
    assert KNOWN_PRIVATE_IMPORTS <= hits, "made public: drop it from KNOWN_PRIVATE_IMPORTS"


def test_no_module_branches_on_an_engines_name() -> None:
    """What differs per engine is a field of its `jobs.engine_specs.EngineSpec` (ZeRO sharding,
    pipeline parallelism), so a new engine is one registry entry: no module compares a name."""
    import re

    from jobs.engine_specs import ENGINE_NAMES

    names = "|".join(ENGINE_NAMES)
    pattern = re.compile(rf"(==|!=)\s*[\"']({names})[\"']|[\"']({names})[\"']\s*(==|!=)")
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for package in ("foundation", "models", "jobs", "data_prep", "scaling", "analysis")
        for path in sorted((ROOT / package).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert hits == []


def test_backends_are_their_own_rooms() -> None:
    """What differs per backend is a method or a field of its class (`scaling.backends.slurm`,
    `scaling.backends.local`, registered in `scaling.backends.base.BACKENDS`), so a new backend
    is one package and one registry line: no module outside `scaling/backends/` compares a
    backend's name (`== "slurm"`, `in ("slurm", "local")`); each module of a backend's rooms
    stays under 400 lines as every module of `scaling/` does (issue 60)."""
    import ast

    from scaling.backends.base import BACKEND_NAMES

    def names_in(node: ast.AST) -> set:
        items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
        return {i.value for i in items if isinstance(i, ast.Constant)}

    backends = ROOT / "scaling" / "backends"
    hits = [
        f"{path.relative_to(ROOT)}:{node.lineno} compares a backend's name"
        for package in ("foundation", "models", "jobs", "data_prep", "scaling", "analysis")
        for path in sorted((ROOT / package).rglob("*.py"))
        if backends not in path.parents
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Compare)
        and set(BACKEND_NAMES)
        & {n for side in (node.left, *node.comparators) for n in names_in(side)}
    ]
    assert hits == [], "\n".join(hits)
