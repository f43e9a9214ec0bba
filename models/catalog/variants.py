"""Variants by name: the built-ins and those a user brings, each a `models.catalog.sites.Variant`.

The four built-in variants (`models.catalog.builtin_variants`) are declared like a user's: the sites
they replace and their accounting. Any other `ModelConfig.query_variant` names a `Variant`
(any site of `models.catalog.sites.SITES`) or a `QueryVariant` (the query site only) defined outside
this package, either as

- ``"package.module:function"``: the function is imported and called with no arguments, or
- a name registered in the entry-point group ``nonlinear_query_scaling.variants`` (the entry
  point is that function).

The function returns a `Variant` or a `QueryVariant`: the modules and how many weights and
norm gains they hold per layer, so the scaling law's N and the FLOPs of a plan stay exact. A
query module is built by `models.query.SeparateQueryAttention` like the built-in ones: it receives
`config` (megatron's TransformerConfig) and `tp_group`, maps X ``[s, b, d]`` (replicated over
TP) to this rank's slice of a full-width query ``[s, b, d / tp]`` (see `models.query`), and K, V
stay linear. docs/variants.md walks through writing one.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.util
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from models.catalog.builtin_variants import BUILTINS
from models.catalog.code_parts import digest_of_parts, user_code_parts
from models.catalog.init_rules import InitRule
from models.catalog.sites import QueryVariant, Variant, as_variant

__all__ = [
    "BUILTIN_VARIANTS",
    "ENTRY_POINT_GROUP",
    "QueryVariant",
    "Variant",
    "SiteInit",
    "site_inits",
    "load_variant",
    "is_builtin",
    "variant_module",
    "code_digest",
    "code_parts",
    "entry_point_names",
    "did_you_mean",
]

BUILTIN_VARIANTS: tuple[str, ...] = tuple(BUILTINS)
ENTRY_POINT_GROUP = "nonlinear_query_scaling.variants"


@dataclass(frozen=True)
class SiteInit:
    """The init rules of one variant-owned module of every layer: `site` is its path inside a
    transformer layer (``self_attention.query``), `rules` map a parameter name inside it to its
    rule, `owner` says who declared them (variant name and file) for error messages."""

    site: str
    rules: dict[str, InitRule]
    owner: str
    key_prefix: str = ""  # what the variant writes before a name in `site` (its init's keys)


def is_builtin(name: str) -> bool:
    return name in BUILTIN_VARIANTS


def entry_point_names() -> list[str]:
    """The names registered in `ENTRY_POINT_GROUP` by installed packages."""
    return sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


def did_you_mean(name: str, choices: list[str] | tuple[str, ...]) -> str:
    """`` (did you mean 'linear'?)`` for a near miss of one of `choices`, else ``""``."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def variant_module(name: str) -> str | None:
    """The module that defines variant `name` (None: a built-in, defined in `models`).

    Found without importing it: ``"pkg.mod:fn"`` names it, an entry point's value does too.
    """
    if is_builtin(name):
        return None
    if ":" in name:
        return name.partition(":")[0]
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return ep.module
    return None


def _code_modules(name: str) -> list[str]:
    """The modules whose source defines variant `name`: the one that names it, plus those that
    define its query module and its init rules (a helper module of rules is code too)."""
    module = variant_module(name)
    if module is None:
        return []
    modules = [module]
    try:
        variant = load_variant(name)
    except ValueError:  # not importable today: its own module's source still counts
        return modules
    sites = variant.sites.values() if isinstance(variant.sites, dict) else [variant.sites]
    for obj in [getattr(spec, "module", spec) for spec in sites] + [variant.init]:
        owner = getattr(obj, "__module__", None)
        if isinstance(owner, str) and owner not in modules and not owner.startswith("megatron"):
            modules.append(owner)
    return modules


def code_digest(name: str) -> str:
    """Digest of the code that defines a model of variant `name` (`code_parts`). A run records
    it (`jobs.telemetry.record`); a finished run whose digest differs from today's was trained by
    other code, and `scaling status` calls it stale."""
    return digest_of_parts(code_parts(name))


def code_parts(name: str) -> dict[str, str]:
    """What `code_digest` is made of (`models.catalog.code_parts.user_code_parts`): the `models`
    package's digest and each module of the user's code that defines variant `name` (its own,
    those of its query class and init rules, and every module of the user's they import)."""
    return user_code_parts(_code_modules(name))


def site_inits(name: str, config: Any) -> list[SiteInit]:
    """The init rules variant `name` declares for `config` (a `ModelConfig`), per site it
    replaces (a site without rules too: its parameters are the variant's to initialise)."""
    if is_builtin(name):
        return []  # their modules use the defaults of `models.init`
    variant = load_variant(name)
    rules = variant.init(config) if variant.init is not None else {}
    is_dict = isinstance(rules, dict)
    bad = [k for k, r in rules.items() if not isinstance(r, InitRule)] if is_dict else []
    owner = f"variant {name!r} ({module_origin(variant_module(name) or '')})"
    if not is_dict or bad:
        raise ValueError(
            f"{owner}: init must return a dict of parameter name -> models.catalog.init_rules rule "
            f"(normal(), zeros(), ...); got {type(rules).__name__}"
            + (f" with non-rule values at {bad}" if bad else "")
        )
    prefix = variant.init_relative_to + "." if variant.init_relative_to else ""
    paths = {site: "" if site == "layer" else site for site in variant.site_names()}
    out = {
        site: SiteInit(path, {}, owner, (path + ".")[len(prefix) :] if path else "")
        for site, path in paths.items()
    }
    for key, rule in rules.items():
        full = prefix + key
        inside = [s for s, p in paths.items() if not p or full.startswith(p + ".")]
        if not inside:
            raise ValueError(
                f"{owner}: init rule {key!r} is not inside a site it replaces "
                f"({', '.join(paths) or 'none'}); name parameters by their path in the layer"
            )
        site = max(inside, key=lambda s: len(paths[s]))
        local = full[len(paths[site]) + 1 :] if paths[site] else full
        out[site].rules[local] = rule
    return list(out.values())


def module_origin(module_name: str) -> str:
    """Where `module_name` lives, for error messages (its file, or "not found")."""
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        spec = None
    return spec.origin if spec is not None and spec.origin else "not found on sys.path"


def _import_error(name: str, module_name: str, err: BaseException) -> ValueError:
    """The import failure itself: module, file, the traceback's last line and where it arose."""
    last = traceback.format_exception_only(type(err), err)[-1].strip()
    missing = err.name if isinstance(err, ModuleNotFoundError) else None
    if missing and (module_name == missing or module_name.startswith(missing + ".")):
        return ValueError(
            f"query variant {name!r}: cannot import module {module_name!r} ({last}); add the "
            "folder that holds it to the study's python_path (relative to the study file) or "
            "to PYTHONPATH, and check the spelling module.path:function"
        )
    frames = traceback.extract_tb(err.__traceback__)
    if isinstance(err, SyntaxError):  # raised by the compiler: the place is the error's own
        where = f", at {err.filename}:{err.lineno}"
    else:
        where = f", at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return ValueError(
        f"query variant {name!r}: importing module {module_name!r} "
        f"({module_origin(module_name)}) failed: {last}{where}"
    )


def _factory(name: str) -> Callable[[], Any]:
    """The function `name` refers to; ValueError naming what failed and the fix."""
    if ":" not in name:
        found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
        if not found:
            known = [*BUILTIN_VARIANTS, *entry_point_names()]
            raise ValueError(
                f"query variant {name!r} is unknown{did_you_mean(name, known)}; valid: "
                f"{', '.join(known)}, or a 'module:function' returning a "
                f"models.catalog.variants.QueryVariant (entry points: group {ENTRY_POINT_GROUP})"
            )
        return found[0].load()
    module_name, _, attr = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # noqa: BLE001 - any error of the user's module is reported
        raise _import_error(name, module_name, err) from err
    factory = getattr(module, attr, None)
    if factory is None:
        public = [a for a in vars(module) if not a.startswith("_")]
        raise ValueError(
            f"query variant {name!r}: module {module_name!r} ({module_origin(module_name)}) has "
            f"no {attr!r}{did_you_mean(attr, public)}; name the function that returns the "
            "QueryVariant"
        )
    return factory


@functools.cache
def load_variant(name: str) -> Variant:
    """The `Variant` that `name` (a built-in, "module:function" or an entry-point name) refers
    to; a `QueryVariant` comes back as the `Variant` of its query site.

    Raises ValueError naming what was tried and how to fix it: an import failure is reported as
    itself (module, file, the exception's last line), an unknown name with the valid names.
    """
    if name in BUILTINS:
        return BUILTINS[name]
    factory = _factory(name)
    try:
        variant = factory()
    except Exception as err:  # noqa: BLE001 - the user's function: say what it raised
        last = traceback.format_exception_only(type(err), err)[-1].strip()
        raise ValueError(f"query variant {name!r}: calling it raised {last}") from err
    if isinstance(variant, QueryVariant):
        return as_variant(variant)
    if not isinstance(variant, Variant):
        raise ValueError(
            f"query variant {name!r}: the function returned {type(variant).__name__}, not a "
            "models.catalog.variants.Variant or QueryVariant"
        )
    try:
        variant.site_names()
    except ValueError as err:
        raise ValueError(f"{err} ({module_origin(variant_module(name) or '')})") from err
    return variant
