"""The group-sequential seed design (``analysis.stats.looks.sequential``): its boundaries against an
independent Monte Carlo, and the whole procedure (looks until it stops) on synthetic studies.

The simulations run a 3-look copy of the default design's shape (start 3, max 7, step 2:
looks at 3, 5 and 7 paired seeds at the top) on 4 sizes 1.2M-100M with 130 bootstrap draws, so
that the file fits CI on 2 cores; the method is the same for the 5-look default (3, 10, 2),
whose boundaries are checked here too. Every study is drawn once with ``max`` seeds per size
(``analysis.synthetic.scenarios.compute_law_study``, per-run sd ``RUN_SD``); each look reads
the seeds the design has asked for so far (``analysis.stats.looks.replay.replay``), and the
naive procedure (every look at 5%) reads the same studies.

Thresholds, from the binomial, decided sequentially (``tests.analysis.bounds.RateTest``): the
null studies run in batches of 20 and stop at the first batch where Wald's test of a 5% claim
rate against 12.5% (2.5 x) is decided, at most ``NULL_STUDIES`` = 180 (the fixed design it
replaced: ``studies_to_catch(0.05, 2.5)``; undecided there, it fails above ``binom.ppf(0.99,
180, 0.05)`` = 16 claims). Exactly (``RateTest.operating``): a design claiming at 5% fails it
with probability 0.99%, one claiming at 12.5% passes it with probability 9.9%; one claiming at
2% stops after 54 studies on average. Measured before (seeds 20000-20179): the design claims
3/180, naive re-testing 10/180. Power: at least 80% of the gain-at-the-margin studies read a
decided positive word (persists or grows): its misses, sequentially, at 20% against 40%.
"""

from __future__ import annotations

import functools
import time
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats

from analysis.judgement import table_judgement
from analysis.stats.analyze import analyse
from analysis.stats.looks.replay import replay, reveal
from analysis.stats.looks.sequential import (
    CLAIMS,
    Design,
    analyse_look,
    data_seed,
    decide_look,
    judge_at,
    seed_cost,
)
from analysis.stats.looks.spending import obf_spending, spending_boundaries
from analysis.synthetic.scenarios import compute_law_study, scenario
from tests.analysis.bounds import RateTest, replay_until_decided, studies_to_catch

SIZES = tuple(float(x) for x in np.geomspace(1.2e6, 1e8, 4))
DESIGN = Design(start=3, max=7, step=2)
RUN_SD = 0.0065  # paired sd 0.28% of the loss at 100M: a fixed 7-seed study has ~95% power
NUM_DRAWS = 130  # look 2's top-size level 0.0155 x 130 / 2 >= 1: its interval is resolved
NULL_STUDIES = studies_to_catch(0.05, 2.5)  # 180: see the module docstring
NULL_TEST = RateTest(0.05, 2.5, batch=20, max_n=NULL_STUDIES)
POWER_STUDIES = 100  # at most
POWER_TEST = RateTest(0.20, 2.0, batch=20, max_n=POWER_STUDIES)
RESOLVED = ("persists", "grows")
MARGIN = 0.5  # % of the loss, the verdict's default margin


def k0_at_margin() -> float:
    """The constant compute multiplier whose true gain at the top size is the margin."""
    c = 120.0 * SIZES[-1] ** 2
    loss = 2.0 + 79.0 * c**-0.1  # compute_law_study's baseline

    def gain(k: float) -> float:
        return 100.0 * (loss - (2.0 + 79.0 * (k * c) ** -0.1)) / loss - MARGIN

    return float(optimize.brentq(gain, 1.0, 2.0))


def study(k0: float, rng_seed: int):
    return compute_law_study(k0, 0.0, rng_seed, num_seeds=DESIGN.max, sizes=SIZES, run_sd=RUN_SD)


# --- boundaries ---------------------------------------------------------------------------------


def monte_carlo_boundaries(fractions: list[float], alpha: float, num_paths: int, rng):
    """Reference boundaries derived without the recursion: Brownian paths at the fractions
    (``Z_k = S_k / sqrt(t_k)``, independent increments), and at each look the z that stops
    the spending's increment among the paths still running (an order statistic)."""
    t = np.asarray(fractions)
    steps = rng.normal(size=(num_paths, len(t))) * np.sqrt(np.diff(t, prepend=0.0))
    z = np.abs(np.cumsum(steps, axis=1) / np.sqrt(t))  # [paths, looks]
    running = np.ones(num_paths, dtype=bool)
    out, spent = [], 0.0
    for k, tk in enumerate(t):
        increment = obf_spending(tk, alpha) - spent
        spent += increment
        m = int(round(increment * num_paths))
        live = np.sort(z[running, k])[::-1]
        c = float(live[m - 1 : m + 1].mean()) if m >= 1 else float("inf")
        out.append((c, m))
        running &= z[:, k] < c
    return out


@pytest.mark.parametrize("num_looks", [2, 3, 4, 5])
def test_boundaries_match_a_monte_carlo_of_brownian_motion(num_looks):
    fractions = [i / num_looks for i in range(1, num_looks + 1)]
    bounds = spending_boundaries(fractions, 0.05)
    reference = monte_carlo_boundaries(fractions, 0.05, 400_000, np.random.default_rng(num_looks))
    for b, (c, m) in zip(bounds, reference, strict=True):
        if m >= 400:  # enough paths stop there for the order statistic to pin z to ~0.02
            assert b.z == pytest.approx(c, abs=0.03), (b, c)
    # and the boundaries, applied to fresh paths, stop each look's share of alpha
    rng = np.random.default_rng(100 + num_looks)
    t = np.asarray(fractions)
    steps = rng.normal(size=(400_000, num_looks)) * np.sqrt(np.diff(t, prepend=0.0))
    z = np.abs(np.cumsum(steps, axis=1) / np.sqrt(t))
    crossed = np.maximum.accumulate(z >= np.array([b.z for b in bounds]), axis=1).mean(axis=0)
    se = np.sqrt(0.05 * 0.95 / 400_000)
    assert crossed == pytest.approx([b.spent for b in bounds], abs=4 * se)


def test_first_look_is_the_spending_function_itself():
    (first, *_rest) = Design().boundaries()
    assert first.z == pytest.approx(stats.norm.isf(0.025) / np.sqrt(0.3))
    assert first.level == pytest.approx(obf_spending(0.3, Design().alpha))


@pytest.mark.parametrize("design", [Design(), DESIGN, Design(start=4, max=12, step=4)])
def test_boundaries_are_monotone_spend_alpha_and_end_below_it(design):
    bounds = design.boundaries()
    z = [b.z for b in bounds]
    levels = [b.level for b in bounds]
    assert all(a > b for a, b in zip(z, z[1:], strict=False)), z
    assert all(a < b for a, b in zip(levels, levels[1:], strict=False)), levels
    assert levels[-1] < design.alpha  # the price of the earlier looks
    increments = np.diff([0.0] + [b.spent for b in bounds])
    assert (increments > 0).all()
    assert increments.sum() == pytest.approx(design.alpha, abs=1e-12)
    print(
        "\n"
        + "\n".join(
            f"look {b.look} t={b.info_fraction:.2f} z={b.z:.3f} "
            f"level={b.level:.5f} spent={b.spent:.5f}"
            for b in bounds
        )
    )


def test_the_default_design_looks_at_3_5_7_9_10_seeds():
    assert Design().planned_seeds() == [3, 5, 7, 9, 10]
    assert Design().info_fractions() == pytest.approx([0.3, 0.5, 0.7, 0.9, 1.0])


@pytest.mark.parametrize(
    "kwargs, field",
    [({"start": 5, "max": 4}, "seeds.max"), ({"step": 0}, "seeds.step"), ({"start": 2}, "start")],
)
def test_a_bad_design_is_refused_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        Design(**kwargs)


# --- one look -----------------------------------------------------------------------------------


def test_a_look_judged_again_equals_the_analysis_run_at_that_level():
    table = reveal(study(k0_at_margin(), 1), {s: 5 for s in map(str, study(1.0, 1)["size"])})
    for alpha in (0.05, 0.005):
        direct = analyse(
            table,
            table_judgement("linear", num_resamples=NUM_DRAWS, seed=data_seed(table), alpha=alpha),
        )
        look = table_judgement("linear", num_resamples=NUM_DRAWS, design=DESIGN)
        again = judge_at(analyse_look(table, look.at_look(DESIGN.alpha)), look.at_look(alpha))
        for row in direct.verdict["variants"]:
            assert again[row["variant"]]["verdict"] == row["verdict"]
            assert again[row["variant"]]["reason"] == row["reason"]


def test_a_look_is_a_pure_function_of_the_finished_runs():
    table = reveal(study(1.0, 2), {s: 3 for s in map(str, study(1.0, 2)["size"])})
    first = decide_look(table, table_judgement("linear", num_resamples=NUM_DRAWS, design=DESIGN), 1)
    shuffled = table.sample(frac=1.0, random_state=5).reset_index(drop=True)
    assert (
        decide_look(shuffled, table_judgement("linear", num_resamples=NUM_DRAWS, design=DESIGN), 1)
        == first
    )
    assert not first.stop and first.add_seeds == {"100M": 2}  # undetected: seeds at the top
    assert first.allocation[0]["why"] == "top size"


def test_equivalence_at_a_look_uses_the_looks_level():
    """``none`` needs the interval at the look's nominal level inside the margin: at an early
    look's tiny level the same table that reads ``none`` at 5% does not."""
    table = compute_law_study(1.0, 0.0, 3, num_seeds=5, sizes=SIZES, run_sd=0.002)
    look = table_judgement("linear", num_resamples=NUM_DRAWS, design=DESIGN)
    result = analyse_look(table, look.at_look(DESIGN.alpha))
    assert judge_at(result, look.at_look(0.05))["nonlinear"]["verdict"] == "none"
    early = judge_at(result, look.at_look(1e-6))["nonlinear"]
    assert early["verdict"] == "undetected", early["reason"]


def test_a_design_defect_stops_the_study_and_says_seeds_do_not_fix_it():
    table = scenario("baseline_lr_edge", 0)  # the baseline's LR grid stops below its best
    look = decide_look(
        table, table_judgement("linear", num_resamples=NUM_DRAWS, design=Design()), 1
    )
    assert look.stop and look.verdict == "inconclusive" and look.add_seeds == {}
    assert "design defect" in look.reason and "more seeds do not bracket an LR" in look.reason


# --- the whole procedure ------------------------------------------------------------------------


def null_study(i: int) -> tuple[str, str, int]:
    """Null study `i`: (the design's final word, naive re-testing's, the design's looks)."""
    seq, nav = replay(
        study(1.0, 20_000 + i),
        table_judgement("linear", num_resamples=NUM_DRAWS, design=DESIGN),
        levels=(None, 0.05),
    )
    return seq.final.verdict, nav.final.verdict, len(seq.looks)


def _naive_claims_more(results: list[tuple[str, str, int]]) -> bool:
    seq = sum(s in CLAIMS for s, _, _ in results)
    return sum(n in CLAIMS for _, n, _ in results) > seq


@functools.cache
def null_run() -> tuple[Counter, Counter, Counter, str, float]:
    t0 = time.perf_counter()
    results, decided = replay_until_decided(
        null_study,
        {"claims": (NULL_TEST, lambda r: r[0] in CLAIMS)},
        until=_naive_claims_more,
    )
    sequential = Counter(s for s, _, _ in results)
    naive = Counter(n for _, n, _ in results)
    looks = Counter(k for _, _, k in results)
    return sequential, naive, looks, decided["claims"], time.perf_counter() - t0


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_identical_arms_claim_at_most_alpha_over_all_looks_and_naive_retesting_more():
    """The design's claims pass ``NULL_TEST`` (see the module docstring); the replay goes on
    (at most to 180 studies) until naive re-testing, on the same studies, has claimed more than
    the design. Without the error spending the design is naive re-testing, and this fails."""
    sequential, naive, looks, decided, seconds = null_run()
    seq_claims = sum(sequential[c] for c in CLAIMS)
    naive_claims = sum(naive[c] for c in CLAIMS)
    n = sum(sequential.values())
    print(
        f"\n{n} null studies, {seconds:.0f} s: sequential claims {seq_claims} "
        f"{dict(sequential)} ({decided}), looks {dict(looks)}; naive (5% at every look) claims "
        f"{naive_claims} {dict(naive)}"
    )
    assert decided == "pass", (seq_claims, n)
    assert naive_claims > seq_claims


FIXED_SEEDS = (5, DESIGN.max)


def margin_study(args: tuple[float, int]):
    """Study `i` of the gain `k0`: the design's replay, and per fixed seed count the word of one
    analysis at 5% with the FLOPs it cost."""
    k0, i = args
    full = study(k0, 30_000 + i)
    (seq,) = replay(full, table_judgement("linear", num_resamples=NUM_DRAWS, design=DESIGN))
    fixed = {}
    for n in FIXED_SEEDS:
        table = reveal(full, {s: n for s in map(str, full["size"].unique())})
        result = analyse(
            table, table_judgement("linear", num_resamples=NUM_DRAWS, seed=data_seed(table))
        )
        fixed[n] = (result.verdict["variants"][0]["verdict"], float(table["flops"].sum()))
    return seq, fixed


def _margin_study(i: int):
    return margin_study((k0_at_margin(), i))


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_gain_at_the_margin_is_resolved_with_fewer_seed_runs_than_the_fixed_design():
    """Fixed designs on the same studies (every size at n seeds, one analysis at 5%): the
    fixed design of equal power needs more seeds than the largest n whose fixed power is
    below the sequential's, so it costs at least (that n + 1) x cells seed-runs. The power is
    ``POWER_TEST``'s: the studies the design leaves unresolved, 20% against 40%, in batches of
    20 up to the fixed 100 (a 20% rate fails it with probability 0.64%, 40% passes with 4.8%);
    the fixed designs and the seed-runs are compared on the studies it ran."""
    t0 = time.perf_counter()
    got, decided = replay_until_decided(
        _margin_study, {"unresolved": (POWER_TEST, lambda r: r[0].final.verdict not in RESOLVED)}
    )
    words = Counter(seq.final.verdict for seq, _ in got)
    resolved = sum(words[w] for w in RESOLVED)
    runs = [seq.num_runs for seq, _ in got]
    flops = [seq.flops for seq, _ in got]
    fixed = {n: Counter(f[n][0] for _, f in got) for n in FIXED_SEEDS}
    fixed_flops = {n: got[0][1][n][1] for n in FIXED_SEEDS}
    power = resolved / len(got)
    fixed_power = {n: sum(c[w] for w in RESOLVED) / len(got) for n, c in fixed.items()}
    below = [n for n, p in fixed_power.items() if p < power]
    cells = 2 * len(SIZES)  # one run per arm per size per seed
    print(
        f"\n{len(got)} studies at the margin, {time.perf_counter() - t0:.0f} s: sequential "
        f"resolved {resolved} ({dict(words)}; {decided}), mean seed-runs {np.mean(runs):.1f}, "
        f"mean FLOPs {np.mean(flops):.3g}; fixed power {fixed_power}, fixed FLOPs {fixed_flops}"
    )
    assert decided == {"unresolved": "pass"}, words
    assert below, f"a fixed design with {min(fixed)} seeds already matches the power {power}"
    assert np.mean(runs) < (max(below) + 1) * cells


def test_an_unpinned_trend_buys_seeds_where_they_narrow_gamma_per_flop():
    """``helps``: gamma's interval decides; the smallest size has the most leverage on the slope
    and costs ~1/7000 of the top's FLOPs per seed, so it gets seeds beside the top."""
    from analysis.stats.looks.sequential import allocate

    full = study(k0_at_margin(), 4)
    table = reveal(full, {s: 3 for s in map(str, full["size"].unique())})
    result = analyse_look(
        table,
        table_judgement("linear", num_resamples=NUM_DRAWS, design=DESIGN).at_look(DESIGN.alpha),
    )
    add, rows = allocate(result, table, DESIGN, {"nonlinear": "helps"})
    assert add["100M"] == 2 and add.get("1.2M") == 2, rows
    assert rows[0]["why"] == "top size"
    assert all(r["width_cut_per_flop"] >= rows[0]["width_cut_per_flop"] for r in rows[1:])
    top_only, _ = allocate(result, table, DESIGN, {"nonlinear": "undetected"})
    assert top_only == {"100M": 2}


def test_equivalence_does_not_stop_a_look_whose_draws_cannot_resolve_its_level():
    """At look 1 (top-size level 0.0022) 130 draws give the draws' range, not a 99.8%
    interval: a ``none`` there is not a decision, and the look asks for seeds."""
    table = compute_law_study(1.0, 0.0, 5, num_seeds=3, sizes=SIZES, run_sd=0.0002)
    look = decide_look(table, table_judgement("linear", num_resamples=NUM_DRAWS, design=DESIGN), 1)
    assert look.verdict == "none" and not look.stop, look.reason
    assert "equivalence not resolved with 130 draws" in look.reason
    assert look.add_seeds == {"100M": 2}


def test_a_seed_costs_one_run_per_arm_whatever_the_lrs_it_scanned():
    """A look adds each arm once at its chosen LR (scaling.looks.sequential_seeds): an arm that
    scanned
    more LRs at one size (its search went past an edge) does not make a seed there dearer."""
    table = reveal(study(1.0, 3), {s: 3 for s in map(str, study(1.0, 3)["size"])})
    table = table.assign(lr=1e-3)  # every arm at one LR
    top = table[table["size"] == table["size"].iloc[-1]]
    extra = top[top["variant"] == "linear"].assign(lr=4e-3)  # and one arm at a second
    wider = pd.concat([table, extra], ignore_index=True)
    cost = seed_cost(table)
    assert seed_cost(wider) == cost
    one_run = table.drop_duplicates(["variant", "size"]).groupby("size")["flops"].sum()
    assert cost == {str(s): float(f) for s, f in one_run.items()}
