"""megatron-core's fused kernels compiled on first use, not at import.

megatron-core decorates a dozen small fused functions (GELU variants, bias-dropout-add, the
output gate, RMS norm) with `megatron.core.jit.jit_fuser`, which is `torch.compile`. Decorating
with `torch.compile` imports TorchDynamo and Inductor (sympy, networkx, functorch): about
3.5 CPU-s of every process that imports megatron-core, measured side by side
(`benchmarks/bench_import.py`), although the project's models turn every fusion off and never call
those functions. Every training job, every rank and every test launch paid it.

`defer_megatron_compile()` installs an import hook that, once `megatron.core.jit` has run,
replaces its `jit_fuser` with a decorator that calls the same `torch.compile` with the same
arguments on the function's first call. A fused function that does run is compiled exactly as
before; one that never runs costs nothing. Each package that imports megatron-core (`data_prep`,
`models`, `jobs`) calls it from its `__init__`, before any megatron import.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["defer_megatron_compile", "deferred"]

_MODULE = "megatron.core.jit"


def deferred(compile_fn: Callable[..., Any]) -> Callable[..., Any]:
    """A decorator like `compile_fn` (`torch.compile`: `@d` or `@d(**options)`) that compiles
    the function on its first call instead of at decoration."""

    def decorate(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
        if fn is None:  # `@jit_fuser(...)` with options
            return lambda f: decorate(f, **options)
        compiled: list[Callable[..., Any]] = []

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            if not compiled:
                compiled.append(compile_fn(fn, **options))
            return compiled[0](*args, **kwargs)

        return call

    decorate.deferred_from = compile_fn  # type: ignore[attr-defined]
    return decorate


class _DeferJitFuser(importlib.abc.MetaPathFinder):
    """Finds `megatron.core.jit` as usual and wraps its `jit_fuser` once the module has run."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != _MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            if not hasattr(module.jit_fuser, "deferred_from"):
                module.jit_fuser = deferred(module.jit_fuser)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def defer_megatron_compile() -> None:
    """Install the hook (once per process); a no-op when megatron-core is already imported."""
    if _MODULE in sys.modules or any(isinstance(f, _DeferJitFuser) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _DeferJitFuser())
