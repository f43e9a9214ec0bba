"""Numbers as a person reads them: rounded to what their interval supports, with units.

Rounding rule: a value with an interval keeps the decimals that give the interval's half-width
two significant digits (a half-width of 1.75 -> one decimal, 0.06 -> three); a value without
one keeps three significant digits. Negative numbers use the minus sign (U+2212).
"""

from __future__ import annotations

import math
import re

from analysis.tables.runs import NA, count_label

MINUS = "\u2212"
_SUPER = str.maketrans(
    "-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079"
)


def _finite(x) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def decimals(ci: list[float] | None) -> int | None:
    """Decimals that give the half-width of ``ci`` two significant digits (None: no interval)."""
    if ci is None or not all(_finite(x) for x in ci):
        return None
    half = abs(ci[1] - ci[0]) / 2
    if half <= 0:
        return None
    return max(0, 1 - math.floor(math.log10(half)))


def num(value, places: int | None = None, sig: int = 3) -> str:
    """``value`` to ``places`` decimals, or ``sig`` significant digits; minus sign, no "-0"."""
    if not _finite(value):
        return NA
    if places is None:
        if value == 0:
            return "0"
        places = max(0, sig - 1 - math.floor(math.log10(abs(value))))
        text = f"{value:.{places}f}" if abs(value) < 1e6 else f"{value:.{sig}g}"
    else:
        text = f"{value:.{places}f}"
    if text.startswith("-") and float(text) == 0:
        text = text[1:]
    return text.replace("-", MINUS)


def with_ci(value, ci, unit: str = "", level: float = 0.95, words: bool | str = False) -> str:
    """``"2.0% [1.1%, 2.9%]"``; with ``words``, ``"2.0% (95% CI 1.1% to 2.9%)"``; with
    ``words="inline"``, ``"2.0%, 95% CI 1.1% to 2.9%"`` (inside a parenthesis already)."""
    if not _finite(value):
        return NA
    places = decimals(ci)
    head = num(value, places) + unit
    if ci is None or places is None:
        return head + (" (no interval)" if words else "")
    lo, hi = (num(x, places) + unit for x in ci)
    if words == "inline":
        return f"{head}, {level_pct(level)} CI {lo} to {hi}"
    if words:
        return f"{head} ({level_pct(level)} CI {lo} to {hi})"
    return f"{head} [{lo}, {hi}]"


def level_pct(level: float) -> str:
    return f"{100 * level:.3g}%"


def count(n) -> str:
    """Parameter / token counts: ``8e5 -> "800K"``, ``1.2e6 -> "1.2M"``, ``7e9 -> "7B"``.

    ``analysis.tables.runs.count_label``: the LR frontier's words (in ``stats``) use it too."""
    return count_label(n)


def power10(x: float, sig: int = 2) -> str:
    """``1.03e12 -> "1.0×10¹²"``."""
    if not _finite(x) or x <= 0:
        return NA
    exp = math.floor(math.log10(x))
    mant = x / 10**exp
    if round(mant, sig - 1) >= 10:
        mant, exp = mant / 10, exp + 1
    return f"{mant:.{sig - 1}f}\u00d710{str(exp).translate(_SUPER)}"


def flops(c: float) -> str:
    """``"1.0×10¹² FLOPs"``."""
    return f"{power10(c)} FLOPs" if _finite(c) else NA


def times(x: float) -> str:
    """How many times: ``3412.7 -> "3,400×"`` (two significant digits), ``2.5 -> "2.5×"``."""
    if not _finite(x):
        return NA
    if x >= 100:
        exp = math.floor(math.log10(x)) - 1
        return f"{round(x, -exp):,.0f}\u00d7"
    return f"{x:.0f}\u00d7" if x >= 10 else f"{x:.2g}\u00d7"


def lr(x) -> str:
    return f"{x:.3g}" if _finite(x) else NA


def si_tick(x: float, _pos=None) -> str:
    """Axis tick for counts: 50K, 100K, 1.2M, 7B (matplotlib FuncFormatter signature)."""
    return count(x) if x > 0 else "0"


def flops_tick(x: float, _pos=None) -> str:
    """Axis tick for FLOPs: ``1e12 -> "10¹²"``, ``3e12 -> "3×10¹²"``."""
    if not x > 0:
        return "0"
    exp = math.floor(math.log10(x) + 1e-9)
    mant = x / 10**exp
    sup = "10" + str(exp).translate(_SUPER)
    return sup if abs(mant - 1) < 1e-6 else f"{mant:.2g}\u00d7{sup}"


def plain_tick(x: float, _pos=None) -> str:
    """Axis tick for losses and LRs: ``3.5``, ``0.003`` (never ``5×10⁰``)."""
    return f"{x:.3g}" if x != 0 else "0"


GAIN_HEADER = ["variant", "size", "tokens", "vs", "gain (loss) [95% CI]", "gain [95% CI]", "seeds"]


def gain_rows(variants: list[dict], key: str) -> list[list]:
    """One table row per paired gain in ``variant[key]`` (a list of per-budget gains)."""
    return [
        [
            v["variant"],
            g["size"],
            count(g["tokens"]),
            g["baseline_arm"],
            with_ci(g["gain_loss"]["value"], g["gain_loss"]["ci95"]),
            with_ci(g["gain_pct"]["value"], g["gain_pct"]["ci95"], "%"),
            g["num_paired_seeds"],
        ]
        for v in variants
        for g in v[key]
    ]


# --- reasons in words -------------------------------------------------------------------------
# ``analysis.stats.rules.verdict.clause`` writes "gain@100M 1.912% CI [1.6, 2.2] > 0" with 4
# significant digits so that tests can parse it back; a reader gets the same numbers rounded like
# the tables.
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|nan|inf|-inf"
_CLAUSE = re.compile(
    rf"(?P<name>[\w@./+\u03b3]+) (?P<v>{_NUMBER})(?P<unit>%| per doubling)? CI "
    rf"\[(?P<lo>{_NUMBER}), "
    rf"(?P<hi>{_NUMBER})\](?P<unit2>%?) (?P<rel>>|<|contains) (?P<ref>{_NUMBER})"
)
_TOKENS = re.compile(rf"@(?P<t>{_NUMBER}) tokens")
_REL = {">": "above", "<": "below", "contains": "includes"}
_NAMES = {"gamma": "\u03b3", "k0": "k0"}


def _clause_words(m: re.Match) -> str:
    name = m["name"]
    if name.startswith("gain@"):  # "gain@2M/5e+06": at a size, or a size and a budget
        size, _, tokens = name[5:].partition("/")
        name = f"gain at {size}" + (f", {count(float(tokens))} tokens" if tokens else "")
    name = _NAMES.get(name, name)
    unit = m["unit"] or m["unit2"] or ("\u00d7" if name == "k0" else "")
    per = ""
    if unit == " per doubling":
        unit, per = "", " per doubling"
    value, ci = float(m["v"]), [float(m["lo"]), float(m["hi"])]
    places = decimals(ci)
    lo, hi = (num(x, places) + unit for x in ci)
    ref = f"{float(m['ref']):g}".replace("-", MINUS)
    return f"{name} {num(value, places)}{unit}{per} (CI {lo} to {hi}, {_REL[m['rel']]} {ref})"


def words(reason: str) -> str:
    """A verdict reason for a reader: every "x CI [lo, hi] > 0" clause rounded like the tables
    and its relation in words; token budgets as counts ("@5e+06 tokens" -> "at 5M tokens")."""
    text = _CLAUSE.sub(_clause_words, reason)
    return _TOKENS.sub(lambda m: f"at {count(float(m['t']))} tokens", text)


# --- fitted parameters ------------------------------------------------------------------------
NOT_IDENTIFIED = "at bound: not identified"
# Where a fitted law's parameter has run off to the edge of what it can mean: the floor E and a
# coefficient toward 0 (or a coefficient without limit), an exponent toward 0 or past any
# plausible value. There the data do not pin the parameter; its digits say nothing.
_RANGES = {"E": (1e-6, 1e6), "exponent": (1e-4, 10.0), "coefficient": (1e-8, 1e20)}


def _kind(name: str) -> str:
    if name == "E":
        return "E"
    return "exponent" if name.startswith(("alpha", "beta", "gamma")) else "coefficient"


def identified(name: str, value) -> bool:
    """False when a fitted parameter sits at a bound of its range (``_RANGES``)."""
    if not _finite(value):
        return False
    lo, hi = _RANGES[_kind(name)]
    return lo < abs(value) < hi


def param(name: str, value, ci) -> str:
    """A fitted parameter with its interval, or ``NOT_IDENTIFIED`` (never a long decimal)."""
    if _finite(value) and not identified(name, value):
        return NOT_IDENTIFIED
    return with_ci(value, ci)
