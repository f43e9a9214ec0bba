"""The gain's interval is the union of the pooled bootstrap and the paired seeds' t interval
(``analysis.stats.gains.robust``); each is right under a failure of the other. Two studies each show
one side's job, in a second: identical arms whose noise the model does not assume (an arm x seed
effect), where the pooled interval alone excludes 0 or lies inside the margin, and the paired
seeds' interval keeps the verdict from a claim or from `none`."""

from __future__ import annotations

import pytest

from analysis.judgement import table_judgement
from analysis.stats.analyze import analyse
from analysis.synthetic.scenarios import Noise, noisy_study

CLAIMS = ("persists", "grows", "fades", "helps", "hurts")
ARM_SEED = 0.008  # sd of an arm x seed effect the noise model does not assume (2x the run sd)


def _top(noise: Noise, rng_seed: int) -> tuple[dict, dict]:
    (v,) = analyse(
        noisy_study(1.0, noise, rng_seed),
        table_judgement("linear", num_resamples=200, seed=rng_seed),
    ).verdict["variants"]
    return v, v["decision"]["top_gain_pct"]


@pytest.mark.parametrize(
    "noise",
    [Noise(arm_seed_sd=ARM_SEED), Noise(arm_all_sizes_sd=ARM_SEED)],
    ids=["arm_seed_across_lrs", "arm_seed_across_sizes"],
)
def test_the_paired_interval_keeps_a_pooled_only_claim_out(noise):
    """Study 9: the pooled interval alone excludes 0 at the top size (it would read `hurts`);
    the paired seeds' interval holds 0, so the union does and there is no claim."""
    v, top = _top(noise, 9)
    pooled, paired = top["pooled_ci"], top["paired_ci"]
    assert pooled[1] < 0, pooled  # the case this guards: the pooled interval alone claims
    assert paired[0] <= 0 <= paired[1], paired
    assert top["ci"] == [min(pooled[0], paired[0]), max(pooled[1], paired[1])]
    assert not top["rejected"]
    assert v["verdict"] not in CLAIMS, v["reason"]


def test_none_needs_the_union_inside_the_margin_not_the_pooled_interval_alone():
    """Study 1 under an arm x seed effect shared across sizes: the pooled interval lies inside
    the +-0.5% margin but the paired seeds' reaches past it: `undetected`, not `none`."""
    v, top = _top(Noise(arm_all_sizes_sd=ARM_SEED), 1)
    margin = v["decision"]["margin_pct"]
    assert -margin <= top["pooled_ci"][0] and top["pooled_ci"][1] <= margin, top["pooled_ci"]
    assert top["paired_ci"][1] > margin or top["paired_ci"][0] < -margin, top["paired_ci"]
    assert v["verdict"] == "undetected", v["reason"]


def test_the_paired_interval_pairs_each_seed_with_its_own():
    """Seed noise almost all shared by a (size, seed) (sd 0.02, per run 0.0005): each seed's
    paired gain cancels it, so the paired-seed interval is narrow (width 0.075% here, verdict
    `none`); pairing each seed with another seed's run gave 4.9% (`undetected`)."""
    table = noisy_study(1.0, Noise(shared_sd=0.02, run_sd=0.0005), rng_seed=2, num_seeds=4)
    (v,) = analyse(table, table_judgement("linear", num_resamples=100, seed=0)).verdict["variants"]
    lo, hi = v["decision"]["top_gain_pct"]["paired_ci"]
    assert hi - lo < 0.3, (lo, hi)
