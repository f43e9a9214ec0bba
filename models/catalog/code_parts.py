"""The parts of a variant's code digest: the project's model code and each module of the user's.

A run records the digest of the code that built its model (`models.catalog.variants.code_digest`)
and its parts, module by module (tag ``scaling.code_files``), so that a result later found stale
says which file changed. The user's code is every module the variant's own modules import,
transitively, that is neither the standard library nor an installed distribution nor one of this
project's packages (`models` is digested whole): a multiply moved into ``helper.py`` beside the
variant is as much the model as the variant's file. Found by reading the source
(`foundation.provenance.imported_modules`), so a job and the `scaling` command that checks its
result agree.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from foundation.provenance import (
    file_digest,
    imported_modules,
    is_installed_or_stdlib,
    module_file,
    source_digest,
)

__all__ = [
    "MODEL_CODE",
    "user_code_parts",
    "digest_of_parts",
    "changed_code",
    "format_parts",
    "parse_parts",
]

# This project's own packages: `models` is digested whole, the others build no model.
_PROJECT_PACKAGES = ("models", "foundation", "jobs", "scaling", "analysis", "data_prep")
MODEL_CODE = "models"  # the part of a code digest that is the project's model code


def _users_code(module: str, path: Path) -> bool:
    """A module of the user's own code: not the standard library, not an installed
    distribution (site-packages), not one of this project's packages."""
    top = module.partition(".")[0]
    return top not in _PROJECT_PACKAGES and not is_installed_or_stdlib(path)


def user_code_parts(roots: list[str]) -> dict[str, str]:
    """{"models": its digest, module: its file's digest} for `roots` (a variant's own modules;
    none for a built-in) and every module of the user's code they import, transitively."""
    parts = {MODEL_CODE: source_digest([MODEL_CODE])}
    for root in roots:
        for module in imported_modules(root, _users_code):
            parts[module] = file_digest(module_file(module))  # type: ignore[arg-type]
        if root not in parts:  # not found on the import path today: counted as missing
            parts[root] = "missing"
    return parts


def digest_of_parts(parts: dict[str, str]) -> str:
    """The 16-hex code digest of `parts` (a built-in's: the `models` package's alone)."""
    if set(parts) == {MODEL_CODE}:
        return parts[MODEL_CODE]
    text = "".join(f"{module} {digest}\n" for module, digest in sorted(parts.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def changed_code(recorded: str | None, today: dict[str, str]) -> list[str]:
    """What changed between the parts a run recorded (tag ``scaling.code_files``, as written by
    `format_parts`) and `today`'s: the changed, added or removed user files, by path where the
    module is found today (``models/`` for the project's model code); [] when not recorded."""
    then = parse_parts(recorded)
    if not then:
        return []
    changed = sorted(m for m in then.keys() | today.keys() if then.get(m) != today.get(m))
    out = []
    for module in changed:
        if module == MODEL_CODE:
            out.append("models/")
            continue
        path = module_file(module)
        out.append(str(path) if path is not None else f"{module} (not found today)")
    return out


def format_parts(parts: dict[str, str], limit: int = 5000) -> str:
    """`parts` as one tag value: ``module=digest`` pairs, space-separated; "" when longer than
    `limit` (an MLflow tag's length: then status says only that the code changed)."""
    text = " ".join(f"{module}={digest}" for module, digest in sorted(parts.items()))
    return text if len(text) <= limit else ""


def parse_parts(value: str | None) -> dict[str, str]:
    """`format_parts`' inverse ({} for None or anything not written by it)."""
    pairs = [item.partition("=") for item in (value or "").split()]
    return {m: d for m, sep, d in pairs if sep and m and d}
