"""Checks of the noise model against the data: sentences that name a misfit, for verdict.json's
``noise_diagnostics`` and the report.

The pooled bootstrap (``analysis.stats.variance.noise``) assumes (1) each component's variance
follows ``c * N^slope`` across sizes and (2) one arm's LR cells at a seed share nothing beyond what
every run of that (size, seed) shares. The verdict does not rest on either
(``analysis.stats.gains.robust`` takes the paired seeds' t interval where it is wider), but a user
should know when the data say they fail, because then the pooled figures (k0, gamma, the power
table's pooled parts) are less sure than printed. Each check is a chi-square or F test at 1%
(Bonferroni over sizes).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from analysis.stats.variance import noise
from analysis.stats.variance.cells import Groups

LEVEL = 0.01


def _blocks(groups: Groups):
    """Per size index: (its complete cells x seeds block, those cells' variants)."""
    y = groups.draws[0]  # [cells, seeds] the data
    cells = groups.cells
    for i, size in enumerate(groups.noise.sizes):
        idx = np.flatnonzero((cells["size"] == size).to_numpy())
        present = np.isfinite(y[idx])
        common = present.all(axis=0)
        if common.sum() < 2:  # the cells that share the best-covered cell's seeds
            widest = present[present.sum(axis=1).argmax()]
            idx, common = idx[present[:, widest].all(axis=1)], widest
        yield i, y[np.ix_(idx, common)], cells["variant"].to_numpy()[idx]


def size_misfits(groups: Groups) -> list[str]:
    """Sizes whose per-run noise is out of line with ``c * N^slope`` fitted on the other sizes
    (left out, so the size cannot pull the trend towards itself)."""
    model = groups.noise
    k = len(model.sizes)
    ms, df = np.full(k, np.nan), np.zeros(k)
    for i, block, _ in _blocks(groups):
        if block.shape[0] >= 2 and block.shape[1] >= 2:
            ms[i], df[i], _, _ = noise.anova(block)
    n_of = groups.info.groupby("size")["num_nonembedding_params"].min()
    log_n = np.log(n_of[model.sizes].to_numpy(float))
    found = []
    for i in np.flatnonzero(df > 0):
        others = df.copy()
        others[i] = 0.0
        if (others > 0).sum() < 2:
            continue
        fitted, _ = noise.pool(ms, others, log_n)
        ratio = ms[i] / fitted[i]
        p = 2 * min(stats.chi2.cdf(df[i] * ratio, df[i]), stats.chi2.sf(df[i] * ratio, df[i]))
        found.append((model.sizes[i], ratio, p))
    return [
        f"seed noise at {size} does not fit c*N^slope: its per-run variance is {ratio:.3g}x "
        f"the trend of the other sizes (p {p:.2g}); the pooled interval is off there, the "
        "paired-seed interval is not"
        for size, ratio, p in found
        if p < LEVEL / len(found)
    ]


def lr_cells_together(groups: Groups) -> list[str]:
    """Arms whose LR cells move together within a seed: an arm x seed effect (F test of the
    arm x seed interaction against the LR x seed residual within arms, pooled over sizes)."""
    ss_arm = df_arm = ss_within = df_within = 0.0
    for _, block, arms in _blocks(groups):
        names = np.unique(arms)
        m, n = block.shape
        if len(names) < 2 or m <= len(names) or n < 2:
            continue
        resid = block - block.mean(1, keepdims=True) - block.mean(0) + block.mean()
        ss_err = float((resid**2).sum())
        ss = sum((arms == a).sum() * (resid[arms == a].mean(0) ** 2).sum() for a in names)
        ss_arm += ss
        df_arm += (len(names) - 1) * (n - 1)
        ss_within += ss_err - ss
        df_within += (m - len(names)) * (n - 1)
    if not (df_arm and df_within and ss_within > 0):
        return []
    f = (ss_arm / df_arm) / (ss_within / df_within)
    p = float(stats.f.sf(f, df_arm, df_within))
    if p >= LEVEL:
        return []
    return [
        f"an arm's LR cells move together within a seed (arm x seed F {f:.3g}, p {p:.2g}): "
        "the pooled noise model does not assume it; the paired-seed interval, which does not "
        "need it, decides where it is wider"
    ]


def noise_diagnostics(groups: Groups) -> list[str]:
    """Every misfit found, as sentences (empty: none found, or no noise model)."""
    if groups.noise is None or groups.cells is None:
        return []
    return size_misfits(groups) + lr_cells_together(groups)
