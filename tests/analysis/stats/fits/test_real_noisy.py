"""The 24-run demo study (real small-model losses, 3 seeds, very noisy) stays cheap and honest.

Every law is fitted on 1,000 parametric-bootstrap draws by the batched fitter; these tests
check that each batched fit is the optimum a fresh L-BFGS run finds from the same start, and
that a draw whose fit does not converge is counted and left out, never kept.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analysis.judgement import table_judgement
from analysis.stats.analyze import analyse
from analysis.stats.fits import batchfit, laws
from analysis.stats.fits import fit as fitting
from analysis.tables.runs import load_csv

DEMO = Path(__file__).parents[2] / "demo_runs.csv"  # from `scaling run studies/demo.yaml`
NUM_RESAMPLES = 1000


@pytest.fixture(scope="module")
def demo():
    return analyse(load_csv(DEMO), table_judgement("linear", num_resamples=NUM_RESAMPLES))


def test_demo_study_fits_every_draw_and_stays_honest(demo):
    assert {f.law for f in demo.fits} == {"L(N)", "L(C)", "k(C)"}
    for row in demo.verdict["fits"]:
        assert row["resamples_fitted"] + row["resamples_failed"] == NUM_RESAMPLES, row
        assert row["resamples_failed"] < 0.1 * NUM_RESAMPLES, row
    (variant,) = demo.verdict["variants"]
    # one LR per cell: the grid is a single point, so no LR is bracketed and nothing is claimed
    assert variant["gamma_ci95"] is not None and variant["verdict"] == "inconclusive"
    assert "LR not bracketed" in variant["reason"]


def _model(groups, fit):
    info = groups.info
    if fit.law == "k(C)":
        return fitting.shared_floor_model(
            info["flops"].to_numpy(float)[fit.points],
            (info["variant"] == "nonlinear").to_numpy()[fit.points],
        )
    column = "num_nonembedding_params" if fit.law == "L(N)" else "flops"
    return fitting.power_law_model(info[column].to_numpy(float)[fit.points])


def test_batched_fits_equal_a_fresh_lbfgs_fit_of_that_draw(demo):
    groups, comp = demo.groups, demo.comparisons["nonlinear"]
    for fit in demo.fits:
        model = _model(groups, fit)
        if fit.law == "k(C)":
            loss = comp.k_points(groups)[2]  # [B+1, P] paired means
        else:
            loss = groups.loss[:, fit.points]
        for b in (1, 2, 500, NUM_RESAMPLES):
            fresh = fitting.fit(
                model, np.log(loss[b]), fit.params[0], None, fitting.RESAMPLE_OPTIONS
            )
            ours, _ = fitting.objective(
                fit.params[b], model, np.log(loss[b]), np.ones(loss.shape[1])
            )
            # the same optimum, or a lower point of the same objective
            assert ours <= fresh.loss * (1 + 1e-6) + 1e-9, (fit.law, b, ours, fresh.loss)
            _assert_same_fit(model, fit.params[b], fresh.params)


def _assert_same_fit(model, ours: np.ndarray, fresh: np.ndarray) -> None:
    """The same parameters, but a floor compared as a loss, not as its log: a draw whose floor
    runs to 0 (e = -40 or -38, a floor of 1e-17 either way, the objective equal to 1e-14) leaves
    its log unidentified, and which of those values a run stops at depends on the machine's
    floating point."""
    floor = np.array([k == "log_floor" for k in model.kinds])
    np.testing.assert_allclose(ours[~floor], fresh[~floor], rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(np.exp(ours[floor]), np.exp(fresh[floor]), rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(model.predict_log(ours), model.predict_log(fresh), atol=1e-6)


def test_a_draw_whose_fit_does_not_converge_is_counted_as_failed(demo, monkeypatch):
    monkeypatch.setattr(batchfit, "MAX_ITER", 1)
    fit = next(f for f in demo.fits if f.law == "L(N)" and f.variant == "linear")
    model = fitting.power_law_model(
        demo.groups.info["num_nonembedding_params"].to_numpy(float)[fit.points]
    )
    starts = fitting.grid_starts(model)
    params, counts = laws.fit_across_resamples(model, demo.groups.loss[:, fit.points], starts, 3)
    failed = np.isnan(params[1:, 0])
    assert counts.failed == failed.sum() > 0.5 * NUM_RESAMPLES
    assert np.isfinite(params[0]).all()
