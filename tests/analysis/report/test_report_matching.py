"""Matching in the report: per size, each arm's N, FLOPs per token and measured time per token,
and how the arms were compared, in verdict.json (``arm_matching``) and as one table per size in
report.md and report.html. Before, only `scaling plan` showed these numbers, and verdict.json's
``compute_axis.matched_compute`` was ``{}``, which nobody could read as "matched".

The demo's runs (equal FLOPs per token per size) timed by a ``tokens_per_s`` column (linear
1000 tokens/s, nonlinear 800, each run off by a few per cent); and the same runs with the
nonlinear arm given 12% more FLOPs per token, which the analysis compares at matched compute.
"""

from __future__ import annotations

import html
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.api import run_analysis
from analysis.judgement import table_judgement
from analysis.report import fmt
from analysis.report.sections.matching import per_token_time
from analysis.tables.arm_costs import MATCHED
from analysis.tables.csv_times import load_csv_runs

DEMO = Path(__file__).parents[1] / "demo_runs.csv"
SPEED = {"linear": 1000.0, "nonlinear": 800.0}
SECTION = "Arms compared: size, FLOPs and time per token"


def _csv(tmp: Path, extra_flops: float = 1.0) -> tuple[Path, pd.DataFrame]:
    runs = pd.read_csv(DEMO)
    jitter = np.exp(np.random.default_rng(63).normal(0, 0.03, len(runs)))
    runs["tokens_per_s"] = runs["variant"].map(SPEED) * jitter
    runs.loc[runs["variant"] == "nonlinear", "flops"] *= extra_flops
    path = tmp / "runs.csv"
    runs.to_csv(path, index=False)
    return path, runs


def _analyse(tmp: Path, extra_flops: float = 1.0):
    path, runs = _csv(tmp, extra_flops)
    table, times = load_csv_runs(path)
    verdict = run_analysis(table, table_judgement("linear", num_resamples=30), tmp, times=times)
    return verdict, runs, (tmp / "report.md").read_text(), (tmp / "report.html").read_text()


@pytest.fixture(scope="module")
def matched(tmp_path_factory):
    return _analyse(tmp_path_factory.mktemp("matched"))


def _md_tables(report: str) -> dict[str, tuple[list[list[str]], str]]:
    """size -> (the size's table rows as cells, the line under it) from the section."""
    section = report.split(f"## {SECTION}\n", 1)[1].split("\n## ", 1)[0]
    out = {}
    for size, body in re.findall(r"\*\*(\S+)\*\*\n\n(.*?)(?=\n\*\*|\Z)", section, re.S):
        lines = body.strip().splitlines()
        rows = [[c.strip() for c in x.strip("|").split("|")] for x in lines if x.startswith("|")]
        line = next(x for x in lines if x.startswith(f"{size}: "))
        out[size] = (rows[2:], line)  # past the header and its rule
    return out


def _html_rows(page: str) -> list[list[str]]:
    """Every table row of the page as its cells' text."""
    cells = re.compile(r"<t[dh][^>]*>(.*?)</t[dh]>", re.S)
    tags = re.compile(r"<[^>]+>")
    return [
        [html.unescape(tags.sub("", c)) for c in cells.findall(row)]
        for row in re.findall(r"<tr>(.*?)</tr>", page, re.S)
    ]


def test_verdict_json_gives_each_arms_size_flops_and_time_per_size(matched):
    verdict, runs, _, _ = matched
    m = verdict["arm_matching"]
    assert m["baseline"] == "linear" and "tokens_per_s" in m["time_source"]
    assert list(m["by_size"]) == ["50K", "100K", "300K", "800K"]  # by N
    for size, row in m["by_size"].items():
        assert set(row["arms"]) == {"linear", "nonlinear"}
        for arm, a in row["arms"].items():
            mine = runs[(runs["size"] == size) & (runs["variant"] == arm)]
            assert a["num_nonembedding_params"] == mine["n_params"].median()
            assert a["num_params_total"] == mine["n_params_total"].median()
            assert a["flops_per_token"] == pytest.approx((mine["flops"] / mine["tokens"]).median())
            geo = math.exp(np.log(1.0 / mine["tokens_per_s"]).mean())
            assert a["time_per_token_s"] == pytest.approx(geo) and a["num_timed_runs"] == 3
        assert row["matched_within_pct"] == pytest.approx(0.0, abs=1e-9)
        assert row["compared_at"] == MATCHED
        assert row["compared_at_by_variant"] == {"nonlinear": MATCHED}


def test_the_report_has_one_table_per_size_in_md_and_html(matched):
    verdict, _, report, page = matched
    tables = _md_tables(report)
    assert list(tables) == list(verdict["arm_matching"]["by_size"])
    html_rows = _html_rows(page)
    for size, (rows, line) in tables.items():
        want = verdict["arm_matching"]["by_size"][size]["arms"]
        assert [r[0] for r in rows] == ["linear", "nonlinear"]
        for arm, n, n_total, per_token, per_time in rows:
            a = want[arm]
            assert n == fmt.count(a["num_nonembedding_params"])
            assert n_total == fmt.count(a["num_params_total"])
            assert per_token == fmt.power10(a["flops_per_token"], sig=3)
            assert per_time == per_token_time(a["time_per_token_s"], 3)
            assert re.fullmatch(r"[\d.]+ (ms|\u00b5s) \(3 runs\)", per_time), per_time
            assert [arm, n, n_total, per_token, per_time] in html_rows  # the same row in HTML
        assert line == (
            f"{size}: FLOPs per token matched within 0% of `linear`'s; compared at {MATCHED}."
        )
        assert html.escape(line.split("`")[0]) in page
    assert "matched_compute" not in report


def test_arms_with_different_flops_say_how_far_apart_and_where_they_were_compared(tmp_path):
    verdict, _, report, _ = _analyse(tmp_path, extra_flops=1.12)
    moved = verdict["compute_axis"]["matched_compute"]["nonlinear"]
    assert moved  # the analysis compared them at matched compute
    tables = _md_tables(report)
    for size, row in verdict["arm_matching"]["by_size"].items():
        assert row["matched_within_pct"] == pytest.approx(12.0, rel=1e-6)
        (record,) = [r for r in moved if r["size"] == size]
        how = row["compared_at_by_variant"]["nonlinear"]
        assert how != MATCHED
        assert how.startswith(
            {
                "baseline": "the variant's compute",
                "variant": "the baseline's compute",
                None: "each arm's own compute",
            }[record["moved"]]
        )
        line = tables[size][1]
        assert (
            line
            == f"{size}: FLOPs per token differ from `linear`'s by up to 12%; compared at {how}."
        )
