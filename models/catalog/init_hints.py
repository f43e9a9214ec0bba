"""What a missing or misspelt init rule's error suggests: a rule that fits the parameter's role,
the user's own line, and the near miss of a misspelt rule.

A parameter without a rule stops the build (`models.init`). The suggestion must not break the
model it fixes: `zeros()` for a temperature zeroes every logit, `ones()` for a bias shifts every
activation. The role is read from the parameter's name and shape only (no torch here): a matrix
or kernel is a weight (`normal()`), a gain, scale or temperature multiplies (`ones()` keeps the
product as it was), a bias or shift adds (`zeros()`); a name that says neither gets both, each
with its role, for the user to choose.
"""

from __future__ import annotations

import difflib
import inspect
import re
from typing import Any

__all__ = ["suggested_rule", "created_at", "misspelt_rule", "rule_text"]

# words in a parameter's name that say it multiplies, or adds (matched per `_`/`.` part)
_MULTIPLIES = ("temperature", "temp", "tau", "scale", "scales", "gain", "gains", "gamma", "mult")
_ADDS = ("bias", "biases", "beta", "shift", "offset")
_RULES = "models.catalog.init_rules"


def _words(name: str) -> set[str]:
    return {w for w in re.split(r"[._]", name.lower()) if w}


def suggested_rule(name: str, shape: tuple[int, ...]) -> tuple[str, str]:
    """(the rule to write for parameter `name` of `shape`, why), by its role."""
    words = _words(name)
    if len(shape) >= 2:
        return "normal()", "a weight matrix or kernel: N(0, init_std), as W_Q"
    if words & set(_MULTIPLIES):
        return "ones()", "it multiplies: ones() leaves the product as it was at step 0"
    if words & set(_ADDS):
        return "zeros()", "it adds: zeros() leaves the sum as it was at step 0"
    return (
        "ones()",
        "ones() if it multiplies (a gain, a temperature), zeros() if it adds (a bias, a shift), "
        "normal() or custom(...) otherwise",
    )


def created_at(module: Any, attr: str) -> tuple[str, int] | None:
    """(file, line) where `module`'s class creates its parameter `attr` (``self.attr = ...`` or
    ``register_parameter("attr", ...)``), else where the class is defined; None for a class
    without source (a built-in torch module)."""
    for cls in type(module).__mro__:
        try:
            lines, first = inspect.getsourcelines(cls)
            path = inspect.getsourcefile(cls)
        except (OSError, TypeError):
            continue
        if path is None or "site-packages" in path:
            continue
        pattern = re.compile(
            rf"self\.{re.escape(attr)}\s*(:[^=]*)?=[^=]|register_parameter\(\s*['\"]{attr}['\"]"
        )
        for offset, line in enumerate(lines):
            if pattern.search(line):
                return path, first + offset
        return path, first
    return None


def misspelt_rule(local: str, rules: dict[str, Any], params: set[str]) -> str | None:
    """The declared rule that names none of the site's `params` and is a near miss of `local`
    (the parameter that has none): the typo the user made."""
    unused = [r for r in rules if r not in params]
    close = difflib.get_close_matches(local, unused, n=1, cutoff=0.6)
    return close[0] if close else None


def rule_text(rule: str) -> str:
    """``models.catalog.init_rules.ones()``: what to write."""
    return f"{_RULES}.{rule}"
