"""No point without an interval beyond the checked range: past the distance the backtest checked,
the extrapolation table says "not predicted" instead of a number, and in both plots the legend
stays clear of the notes on the figure ("not drawn, beyond 100x the data", "extrapolated").

The demo (`tests/analysis/demo_runs.csv`, 4 sizes 50K-800K) backtests 2x its fitted compute;
1B and 7B lie 10^7x and more beyond its data. Checked on the parsed table rows and on the
figures' artists (their window extents), not on pixels.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from analysis.api import run_analysis
from analysis.judgement import table_judgement
from analysis.report import figures
from analysis.tables.runs import load_csv
from tests.analysis.report.test_report_words import md_table

DEMO = Path(__file__).parents[1] / "demo_runs.csv"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """(verdict, report.md, {figure name: figure}) of the demo, each figure as it was saved."""
    drawn = {}
    save = figures.save

    def keep(fig, out_dir, name, tight=True):
        out = save(fig, out_dir, name, tight)
        drawn[name] = fig
        return out

    out = tmp_path_factory.mktemp("extrapolation")
    mp = pytest.MonkeyPatch()
    mp.setattr(figures, "save", keep)
    try:
        verdict = run_analysis(load_csv(DEMO), table_judgement("linear", num_resamples=100), out)
    finally:
        mp.undo()
    return verdict, (out / "report.md").read_text(), drawn


def test_past_the_checked_range_the_table_says_not_predicted(demo):
    verdict, report, _ = demo
    shown = verdict["backtest"]["skill"]["shown_up_to_compute_ratio"]
    table = md_table(report, "Extrapolation (shown, never the basis of a claim)")
    rows = {(r["variant"], r["scale"]): r for r in table}
    (v,) = verdict["variants"]
    assert set(v["extrapolated_gain_pct"]) == {"1B", "7B"}
    for name, e in v["extrapolated_gain_pct"].items():
        assert e["times_largest_measured_compute"] > shown and not e["within_backtest_skill"]
        cell = rows[(v["variant"], name)]["model gain"]
        assert cell == "not predicted (beyond the 2× the backtest checked)", cell
        assert "%" not in cell  # no number at all, with or without an interval


@pytest.mark.parametrize("name", ["gain_vs_n", "k_vs_c"])
def test_the_legend_stays_clear_of_every_note_on_the_figure(demo, name):
    fig = demo[2][name]
    FigureCanvasAgg(fig)  # saved and closed: a canvas again, to lay the artists out as saved
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (ax,) = fig.axes
    legend = ax.get_legend().get_window_extent(renderer)
    notes = [t for t in ax.texts if t.get_text().strip()]
    assert any("not drawn, beyond" in t.get_text() for t in notes)  # 1B, 7B: listed in words
    for note in notes:
        box = note.get_window_extent(renderer)
        assert not legend.overlaps(box), (note.get_text(), legend, box)
        assert fig.bbox.contains(box.x0, box.y0) and fig.bbox.contains(box.x1, box.y1), (
            note.get_text(),
            box,
        )  # the whole note on the figure, none cut at its edge
