"""Provenance tags for a run: what produced it (code version, packages, hardware).

modded-nanogpt's rule: every run logs what it needs to be reproduced on its own. torch is
imported only inside `device_name`, so importing this module stays light.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import site
import socket
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "device_name",
    "versions",
    "git_commit",
    "host_name",
    "source_digest",
    "module_file",
    "file_digest",
    "is_installed_or_stdlib",
    "imported_modules",
]

PACKAGES = ("torch", "megatron-core", "deepspeed", "mlflow", "pydantic", "nonlinear-query-scaling")


def device_name() -> str:
    """The accelerator (CUDA device name), or the CPU's core and thread counts."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return f"cpu ({os.cpu_count()} cores, {torch.get_num_threads()} threads)"


def host_name() -> str:
    return socket.gethostname()


def versions() -> dict[str, str]:
    """`version.<package>` tags of the packages that decide a run's numbers."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in PACKAGES:
        try:
            out[f"version.{pkg}"] = version(pkg)
        except PackageNotFoundError:
            out[f"version.{pkg}"] = "absent"
    return out


def git_commit() -> str:
    """The checkout's HEAD commit, or "unknown" outside a git checkout."""
    repo = Path(__file__).resolve().parents[1]
    try:
        result = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return result.stdout.strip() or "unknown"


def _source_files(module: str) -> tuple[Path, list[Path]] | None:
    """(root, the .py files of `module`: every one under a package), or None if not found.

    Found by `importlib.util.find_spec`, which imports only a dotted name's parent packages.
    """
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        root = Path(next(iter(spec.submodule_search_locations)))
        return root, sorted(root.rglob("*.py"))
    if spec.origin and Path(spec.origin).is_file():
        return Path(spec.origin).parent, [Path(spec.origin)]
    return None


def source_digest(modules: list[str]) -> str:
    """A 16-hex digest of the source of `modules` (packages: every .py file under them).

    What decides whether a finished run still describes the code: a run records the digest of
    the code that built its model, and a changed digest makes its result stale. File names
    count relative to their package, so the same code in another checkout has the same digest.
    """
    h = hashlib.sha256()
    for module in modules:
        h.update(f"module {module}\n".encode())
        found = _source_files(module)
        if found is None:
            h.update(b"not found\n")
            continue
        root, files = found
        for path in files:
            h.update(f"file {path.relative_to(root).as_posix()}\n".encode())
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:16]


def module_file(module: str) -> Path | None:
    """The source file of `module` (a package: its ``__init__.py``), or None: not found, or not
    Python source (built-in, frozen, an extension). Found by `importlib.util.find_spec`, which
    imports a dotted name's parent packages, never the module itself."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError, AttributeError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    path = Path(spec.origin)
    return path if path.is_file() else None


def file_digest(path: Path) -> str:
    """A 12-hex digest of one file's bytes (a part of a code digest, by module)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def _installed_roots() -> tuple[Path, ...]:
    """Where the standard library and installed distributions live (site-packages)."""
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots |= set(site.getsitepackages()) | {site.getusersitepackages()}
    roots |= {sysconfig.get_paths(vars={"base": sys.base_prefix})["stdlib"]}
    return tuple(Path(r).resolve() for r in roots if r)


def is_installed_or_stdlib(path: Path) -> bool:
    """`path` is part of the standard library or of an installed distribution."""
    resolved = path.resolve()
    return any(resolved.is_relative_to(root) for root in _installed_roots())


def _imports(path: Path, module: str) -> list[str]:
    """The absolute module names a source file imports, anywhere in it (inside a function too):
    ``import a.b`` gives a and a.b; ``from a import b`` gives a and a.b (b may be a module);
    relative imports are resolved against `module`'s package."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError):
        return []  # a file that does not compile: its own bytes still count
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                out += [".".join(parts[: i + 1]) for i in range(len(parts))]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                try:
                    base = importlib.util.resolve_name("." * node.level + base, package)
                except (ImportError, ValueError):
                    continue
            if not base:
                continue
            parts = base.split(".")
            out += [".".join(parts[: i + 1]) for i in range(len(parts))]
            out += [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]
    return out


def imported_modules(module: str, keep: Callable[[str, Path], bool]) -> list[str]:
    """`module` and every module it imports, transitively, whose name and file `keep` accepts
    (sorted; `module` itself always, when found).

    Read from the source (`ast`), not from what is imported now, so every process that reads
    the same files on the same import path finds the same modules: a job and the `scaling`
    command that checks its result agree. An import is followed only where `keep` accepts it,
    and a dotted name only where its parent was accepted, so nothing outside (torch, megatron)
    is looked up, let alone imported.
    """
    ancestors = [module.rsplit(".", i)[0] for i in range(1, module.count(".") + 1)]
    found: dict[str, Path] = {}
    seen: set[str] = set()  # looked at: found, or refused
    todo = [module, *ancestors]  # a package's __init__ runs when its module is imported
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        parent = name.rpartition(".")[0]
        if parent and parent not in found and parent not in ancestors:
            if parent not in seen:
                todo += [name, parent]  # the parent first: never look inside a refused one
            else:
                seen.add(name)  # inside a refused package (torch.nn): not looked up
            continue
        seen.add(name)
        path = module_file(name)
        if path is None or (name != module and not keep(name, path)):
            continue
        found[name] = path
        todo += _imports(path, name)
    return sorted(found)
