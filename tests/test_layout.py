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


def test_the_shared_command_module_stays_small() -> None:
    """`scaling/cli/commands.py` holds what the study commands share; a command of its own goes
    in a module beside it (`run_command`, `status_command`, ...), so the shared one stays
    readable: under 400 lines (issue 50)."""
    lines = (ROOT / "scaling" / "cli" / "commands.py").read_text().count("\n")
    assert lines < 400, f"scaling/cli/commands.py has {lines} lines: move a command out"


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
    backend's name (`== "slurm"`, `in ("slurm", "local")`), and each module of a backend's
    rooms stays under 400 lines (issue 60)."""
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
    long = [
        f"{path.relative_to(ROOT)}: {lines} lines"
        for path in sorted(backends.rglob("*.py"))
        if (lines := path.read_text().count("\n")) >= 400
    ]
    assert long == [], f"split these by job inside their backend's package: {long}"
