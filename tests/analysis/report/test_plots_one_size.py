"""A study of one size draws its gain plot without numpy's RankWarning: the N -> C line the
k(C) curve is drawn along needs two sizes, so with one it is not fitted (issue 54)."""

from __future__ import annotations

import warnings

import numpy as np

from analysis.api import run_analysis
from analysis.judgement import table_judgement
from analysis.synthetic.studies import Effect, make_study


def test_one_size_draws_the_gain_plot_without_a_rank_warning(tmp_path):
    table = make_study({"linear": Effect(), "nonlinear": Effect(k0=1.5)}, sizes=(2e6,), num_seeds=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", np.exceptions.RankWarning)
        run_analysis(table, table_judgement("linear", num_resamples=0), tmp_path)
    assert (tmp_path / "gain_vs_n.png").is_file()  # the measured gain is still drawn
