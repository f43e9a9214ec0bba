"""An inference ratio whose repeats disagree still says which side of 1 it lies on
(`analysis.stats.inference.ratio_bound`): a spread wholly above 1 is a lower bound, one wholly
below 1 an upper bound, and only a spread that holds 1 (or too few rounds) is unresolved.

The first case is the one a study printed as ``prefill unresolved (2.82-5.68)``: every repeat
said the arm is at least 2.8x costlier, and the report said nothing.
"""

from __future__ import annotations

import pytest

from analysis.report.sections.inference import ratio_text
from analysis.stats.inference import MIN_ROUNDS, inference_summary, ratio_entry


def _prefill(arm_rounds: list[float]) -> dict:
    """The prefill entry of an arm timed side by side with a baseline at 1000 tokens/s a round,
    so the per-round cost ratio is 1000 / the arm's tokens/s."""
    rows = []
    for variant, tok_s in (("linear", [1000.0] * len(arm_rounds)), ("gqa", arm_rounds)):
        rows.append(
            {
                "variant": variant,
                "size": "1M",
                "prefill_tok_s": sorted(tok_s)[len(tok_s) // 2],
                "decode_ms_b1": 1.0,
                "decode_ms_b32": 1.0,
                "peak_mem_mb": 1.0,
                "rounds": {"prefill_tok_s": tok_s},
                "session": "1M",
            }
        )
    summary = inference_summary({"device": "cpu", "rows": rows}, "linear")
    return summary["ratios"]["gqa"]["1M"]["prefill"]


def test_a_spread_wholly_above_1_is_a_lower_bound():
    # per-round cost ratios 2.0, 2.82, 4.0, 5.68, 7.0: their middle half is 2.82 .. 5.68
    entry = _prefill([1000 / r for r in (2.0, 2.82, 4.0, 5.68, 7.0)])
    assert not entry["resolved"]
    assert entry["spread"] == pytest.approx([2.82, 5.68])
    assert entry["bound"]["side"] == "at_least"
    assert entry["bound"]["value"] == pytest.approx(2.82)
    assert ratio_text(entry) == "\u2265 2.82x (2.82-5.68)"


def test_a_spread_wholly_below_1_is_an_upper_bound():
    entry = ratio_entry([0.1, 0.2, 0.3, 0.41, 0.6])
    assert not entry["resolved"]
    assert entry["bound"] == {"side": "at_most", "value": pytest.approx(0.41)}
    assert ratio_text(entry).startswith("\u2264 0.41x")


def test_a_spread_that_holds_1_is_unresolved():
    entry = ratio_entry([0.5, 0.68, 1.2, 1.88, 3.0])
    assert not entry["resolved"] and entry["bound"] is None
    assert ratio_text(entry) == "unresolved (0.68-1.88)"


def test_too_few_rounds_give_no_bound_and_agreeing_rounds_a_number():
    few = ratio_entry([2.0, 6.0][: MIN_ROUNDS - 1])
    assert not few["resolved"] and few["bound"] is None
    agree = ratio_entry([1.20, 1.21, 1.22, 1.23])
    assert agree["resolved"] and agree["bound"] is None
    assert ratio_text(agree) == f"{agree['value']:.2f}x (1.21-1.22)"
