"""The batched fitter (``analysis.stats.fits.batchfit``) fits each row as if it were alone.

It packs the rows still moving and drops each as it converges; nothing of one row may reach
another, or be lost when a row leaves. Checked against the truth of the rows themselves: each
row fitted on its own, bit for bit, at a step cap that stops every row mid-way, one that stops
most rows converged, and the default (where a draw without a floor crawls to the cap).
"""

from __future__ import annotations

import numpy as np
import pytest

from analysis.stats.fits import batchfit, fit

SIZES = np.geomspace(1e6, 1e8, 4)
NUM_ROWS = 60


def _draws() -> tuple[np.ndarray, np.ndarray]:
    """log-losses and weights of ``NUM_ROWS`` noisy draws of ``E + 400 N^-0.3``: every third
    without a floor (E = 0: the damped steps crawl there), two with a point left out."""
    rng = np.random.default_rng(7)
    floor = np.where(np.arange(NUM_ROWS) % 3 == 0, 0.0, 1.7)
    truth = floor[:, None] + 400.0 * SIZES[None, :] ** -0.3
    loss = truth * np.exp(rng.normal(0.0, 0.004, size=truth.shape))
    weight = np.ones_like(loss)
    weight[5, 1] = weight[11, 3] = 0.0
    return np.log(loss), weight


@pytest.mark.parametrize("max_iter", [3, 40, None])
def test_each_row_is_fitted_as_if_it_were_alone(max_iter):
    model = fit.power_law_model(SIZES)
    log_loss, weight = _draws()
    start = np.array([np.log(400.0), 0.3, np.log(1.7)])
    params, converged, iterations = batchfit.fit_batch(model, log_loss, weight, start, max_iter)
    if max_iter == 3:
        assert not converged.any()  # every row stopped mid-way: its last accepted step counts
    else:
        assert 0 < converged.sum() < NUM_ROWS  # rows leave at different steps, some never
    assert iterations == (max_iter or batchfit.MAX_ITER)
    for i in range(NUM_ROWS):
        alone, done, _ = batchfit.fit_batch(
            model, log_loss[i : i + 1], weight[i : i + 1], start, max_iter
        )
        assert np.array_equal(alone[0], params[i]) and done[0] == converged[i], i
