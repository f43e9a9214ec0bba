"""The token axis on synthetic L(N, D) truths: verdicts along D and N, per-budget
gain coverage, L(N, D) recovery, the N verdict's independence from smaller budgets, the
report section, and MLflow's stable runs left out."""

from __future__ import annotations

import functools
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.judgement import table_judgement
from analysis.report import fmt
from analysis.stats.analyze import analyse
from analysis.stats.axes import tokens as token_axis
from analysis.stats.rules.verdict_tokens import RULE_D
from analysis.synthetic.studies import ArmLaw, make_nd_study, true_gain

BASE = ArmLaw()
# B 3% lower: a data-efficiency gain. Along D = 20 N (alpha = beta) the variant is the baseline
# at a constant compute multiplier (persists along N); at a fixed N its gap B' / D^beta closes
# as D grows (fades along D).
FADES_ALONG_D = ArmLaw(B=0.97 * BASE.B)
# A/N^alpha times 0.92 at 2M rising to 0.98 at 100M: a parameter-side gain that shrinks with N
# (fades along N) and, having no D term, is the same at every budget (persists along D).
_DELTA = float(np.log(0.98 / 0.92) / np.log(50.0))
FADES_ALONG_N = ArmLaw(A=BASE.A * 0.92 * 2e6**-_DELTA, alpha=BASE.alpha - _DELTA)
TRUTHS = {
    "fades_along_d": (FADES_ALONG_D, "persists", "fades"),
    "fades_along_n": (FADES_ALONG_N, "fades", "persists"),
    "null": (BASE, "none", "none"),
}
README = Path(__file__).resolve().parents[4] / "README.md"


@functools.lru_cache(maxsize=8)  # the reason test reads the verdict test's analysis
def _verdicts(variant: ArmLaw, rng_seed: int, num_resamples: int = 200) -> tuple[dict, dict]:
    table = make_nd_study({"linear": BASE, "nonlinear": variant}, rng_seed=rng_seed)
    result = analyse(table, table_judgement("linear", num_resamples=num_resamples))
    (along_n,) = result.verdict["variants"]
    (along_d,) = result.verdict["tokens"]["variants"]
    return along_n, along_d


@pytest.mark.parametrize("name", list(TRUTHS))
def test_each_truth_gets_its_verdicts_along_n_and_along_d(name):
    variant, want_n, want_d = TRUTHS[name]
    along_n, along_d = _verdicts(variant, rng_seed=3)
    assert (along_n["verdict"], along_d["verdict"]) == (want_n, want_d), (
        along_n["reason"],
        along_d["reason"],
    )


def test_reason_along_d_states_the_numbers_the_decision_holds():
    _, along_d = _verdicts(FADES_ALONG_D, rng_seed=3)
    s = along_d["decision"]["slope"]
    lo, hi = s["ci"]
    assert hi < 0
    assert f"slope {s['value']:.4g} per doubling CI [{lo:.4g}, {hi:.4g}] < 0" in along_d["reason"]
    match = re.search(r"gain@(\S+)/(\S+) (\S+) CI \[(\S+), (\S+)\] > 0", along_d["reason"])
    assert match, along_d["reason"]
    size, tokens = match.group(1), float(match.group(2))
    row = next(
        g
        for g in along_d["gain_by_budget"]
        if g["size"] == size and float(f"{g['tokens']:.3g}") == tokens
    )
    assert float(match.group(3)) == pytest.approx(row["gain_loss"]["value"], rel=1e-3)
    assert float(match.group(4)) > 0


def test_smaller_budgets_do_not_change_the_n_verdict():
    """The N verdict reads each size's largest budget only: the same study with and without its
    smaller branches gives identical N numbers (the draws are the same draws)."""
    table = make_nd_study({"linear": BASE, "nonlinear": FADES_ALONG_D}, rng_seed=5)
    largest = table[table.groupby("size")["tokens"].transform("max") == table["tokens"]]
    full = analyse(table, table_judgement("linear", num_resamples=100)).verdict
    only_top = analyse(
        largest.reset_index(drop=True), table_judgement("linear", num_resamples=100)
    ).verdict
    assert "tokens" in full and "tokens" not in only_top
    (a,), (b,) = full["variants"], only_top["variants"]
    for key in ("verdict", "reason", "decision", "gain_pct_by_size", "k0", "gamma"):
        assert a[key] == b[key], key
    nd = [f for f in full["fits"] if f["law"] == "L(N,D)"]
    assert {f["variant"] for f in nd} == {"linear", "nonlinear"}
    assert [f for f in full["fits"] if f["law"] != "L(N,D)"] == only_top["fits"]


def test_token_counts_within_two_percent_are_one_budget():
    table = make_nd_study({"linear": BASE, "nonlinear": BASE}, fractions=(0.5, 1.0), rng_seed=0)
    nudged = table.copy()
    bump = nudged["variant"] == "nonlinear"
    nudged.loc[bump, "tokens"] *= 1.004  # e.g. whole-step rounding of the same budget
    snapped = token_axis.snap_budgets(nudged)
    assert snapped.groupby("size")["tokens"].nunique().eq(2).all()
    assert np.allclose(snapped.loc[~bump, "tokens"], nudged.loc[~bump, "tokens"] * 1.004)
    verdict = analyse(nudged, table_judgement("linear", num_resamples=50)).verdict
    (row,) = verdict["tokens"]["variants"]
    assert len(row["gain_by_budget"]) == 2 * table["size"].nunique()  # every budget matched


def _coverage(num_studies: int, num_resamples: int, first_seed: int) -> tuple[int, int]:
    """(covered, total) per-budget 95% gain CIs against the true gain: 5 sizes x 3 budgets
    per study, a 3-LR grid per arm, noise with a trunk shared by the branches of one run."""
    covered = total = 0
    for s in range(num_studies):
        table = make_nd_study(
            {"linear": BASE, "nonlinear": FADES_ALONG_D},
            fractions=(0.25, 0.5, 1.0),
            rng_seed=first_seed + s,
        )
        slices = token_axis.build_slices(token_axis.snap_budgets(table), num_resamples, seed=s)
        for p in token_axis.matched_points(slices, ["linear"], "nonlinear"):
            ci = token_axis._stat(p.budget.gain_loss, p.has_ci)["ci95"]
            truth = true_gain(BASE, FADES_ALONG_D, p.n_params, p.budget.tokens)
            covered += int(ci[0] <= truth <= ci[1])
            total += 1
    return covered, total


def test_per_budget_gain_intervals_cover_the_truth():
    """20 studies x 15 (size, budget) gains at 95%. Measured: 272/300 = 90.7% (first seed 1000)."""
    covered, total = _coverage(20, 200, first_seed=1000)
    print(f"per-budget gain coverage: {covered}/{total} = {covered / total:.3f}")
    assert 0.88 <= covered / total <= 0.99


@pytest.mark.slow
def test_per_budget_gain_intervals_cover_the_truth_over_200_studies():
    """200 studies x 15 gains, 400 draws each. Measured: 2833/3000 = 94.4% (first seed 2000)."""
    covered, total = _coverage(200, 400, first_seed=2000)
    print(f"per-budget gain coverage: {covered}/{total} = {covered / total:.3f}")
    assert 0.91 <= covered / total <= 0.975


def test_l_n_d_fit_recovers_the_exponents():
    table = make_nd_study({"linear": BASE}, num_seeds=3, lr_grid=None, rng_seed=7)
    fits = analyse(table, table_judgement("linear", num_resamples=100)).verdict["fits"]
    (nd,) = [f for f in fits if f["law"] == "L(N,D)"]
    p = nd["params"]
    assert nd["num_points"] == 20
    for name, truth in (("alpha", BASE.alpha), ("beta", BASE.beta), ("E", BASE.E)):
        assert p[name]["value"] == pytest.approx(truth, rel=0.1), name
        lo, hi = p[name]["ci95"]
        assert lo < p[name]["value"] < hi


@pytest.mark.slow
@pytest.mark.parametrize("name", list(TRUTHS))
def test_verdict_accuracy_over_20_studies(name):
    """How often each truth gets its verdicts (N and D) over 20 noise draws."""
    variant, want_n, want_d = TRUTHS[name]
    got = [_verdicts(variant, rng_seed=100 + s, num_resamples=200) for s in range(20)]
    right_n = sum(n["verdict"] == want_n for n, _ in got)
    right_d = sum(d["verdict"] == want_d for _, d in got)
    words_n = Counter(n["verdict"] for n, _ in got)
    print(f"{name}: along N {right_n}/20 {want_n} {dict(words_n)}, along D {right_d}/20 {want_d}")
    wrong_claims = sum(d["verdict"] in {"grows", "persists", "fades", "hurts"} for _, d in got)
    # along N a real gain may read `helps` (trend not pinned) or `undetected` (the top size's
    # paired test on 3 seeds misses it: no claim), never a claim of the wrong kind; identical
    # arms claim nothing, along either axis
    real = {"helps", "undetected"}
    # fades_along_d's true gain at the top size along N is 0.27%, inside the +-0.5% margin:
    # an interval within it (`none`, equivalent) reads it rightly
    assert 100 * true_gain(BASE, FADES_ALONG_D, 1e8, 2e9) / BASE.loss(1e8, 2e9) < 0.5
    allowed_n = {"null": {"none", "undetected"}, "fades_along_d": {"persists", "none"} | real}
    allowed_n["fades_along_n"] = {"fades"} | real
    wrong_n = sum(n["verdict"] not in allowed_n[name] | {"inconclusive"} for n, _ in got)
    assert wrong_n <= 2, words_n
    if name == "null":
        assert wrong_claims <= 2
        assert right_n + words_n["undetected"] >= 18, words_n
    else:
        assert right_d >= 18
        # a trend word whose study's own backtest disagreed at the top size reads `helps` with
        # the reason (rule 9): the right word held back, not a wrong one
        held = sum(n["verdict"] == "helps" and "law changed" in n["reason"] for n, _ in got)
        # measured (seeds 100-119): persists 9/20 (undetected 8, none 2, grows 1) along N, 11/20
        # before the grid's resolution entered the test; since rule 9, persists 7 and 2 held
        # back as helps; fades 13/20 (undetected 7) along N
        assert right_n + held >= {"fades_along_d": 9, "fades_along_n": 11}[name], words_n


def test_readme_states_the_rule_along_d():
    text = README.read_text()
    section = text.split("**The verdict along D.**")[1].split("\n- **")[0]
    readme = re.findall(r"^\s+- \*\*(\w+)\*\*", section, flags=re.M)
    code = re.findall(r"^\d\. (\w+):", RULE_D, flags=re.M)
    assert readme == code, (readme, code)
    assert "Extrapolation never makes a claim" in RULE_D


def test_report_has_the_token_section_only_with_several_budgets(tmp_path):
    from analysis.api import run_analysis
    from analysis.judgement import table_judgement
    from analysis.report.sections.tokens import gain_vs_tokens, token_blocks

    arms = {"linear": BASE, "nonlinear": FADES_ALONG_D}
    table = make_nd_study(arms, sizes=(2e6, 1e7, 1e8), lr_grid=None)
    verdict = run_analysis(table, table_judgement("linear", num_resamples=50), tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "## Along D: does the gain persist with more tokens?" in md
    assert (tmp_path / "gain_vs_tokens.png").stat().st_size > 0
    assert "gain_vs_tokens.png" in md and RULE_D.splitlines()[0] in md
    assert f"**{verdict['tokens']['variants'][0]['verdict']}**" in md
    one_budget = {k: v for k, v in verdict.items() if k != "tokens"}
    assert token_blocks(one_budget, {}) == [] and gain_vs_tokens(one_budget, tmp_path) is None


def test_load_study_leaves_out_stable_runs(mlflow_server):
    import uuid

    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    from analysis.tables.mlflow_io import load_study_runs
    from foundation import contract

    client = MlflowClient(tracking_uri=mlflow_server)
    name = f"tokens_{uuid.uuid4().hex[:8]}"
    exp_id = client.create_experiment(f"exp_{name}")
    kinds = {
        "stable": contract.KIND_STABLE,
        "D1e+06": contract.KIND_BRANCH,
        "D2e+06": contract.KIND_BRANCH,
    }
    for i, (suffix, kind) in enumerate(kinds.items()):
        tags = {"study": name, "variant": "linear", "size": "1M", "seed": "0"}
        run = client.create_run(exp_id, tags=tags | {contract.TAG_CELL_KIND: kind}, run_name=suffix)
        metrics = {"num_nonembedding_params": 1e6, "tokens": (i or 2) * 1e6}
        metrics["final_val_loss"] = 3.0 + i
        client.log_batch(run.info.run_id, metrics=[Metric(k, v, 0, 0) for k, v in metrics.items()])
        client.set_terminated(run.info.run_id)
    table, _ = load_study_runs(mlflow_server, f"exp_{name}", name)
    assert len(table) == 2 and sorted(table["tokens"]) == [1e6, 2e6]
    assert isinstance(table, pd.DataFrame)


def test_cli_prints_the_verdict_along_d(tmp_path):
    """`scaling analyze --runs-csv` on a branched study: the N and the D verdict, one line each,
    and verdict.json's `tokens` section."""
    import json

    from typer.testing import CliRunner

    from scaling.cli import app as scaling_app

    app = scaling_app  # the `scaling` command itself
    csv = tmp_path / "runs.csv"
    arms = {"linear": BASE, "nonlinear": FADES_ALONG_D}
    make_nd_study(arms, sizes=(2e6, 1e7, 1e8), lr_grid=None).to_csv(csv, index=False)
    out = tmp_path / "out"
    args = ["analyze", "--runs-csv", str(csv), "--out", str(out), "--resamples", "50"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    verdict = json.loads((out / "verdict.json").read_text())
    (row,) = verdict["tokens"]["variants"]
    line = f"nonlinear vs linear along D: {row['verdict']}: {fmt.words(row['reason'])}"
    assert line in res.output


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"fractions": (0.5, 1.0)}, "2 budget(s) both arms measured at any one size"),
        (
            {"lr_grid": (1.0, 2.0)},
            "cell(s): linear and nonlinear at 2M (5M, 10M, 20M, 40M tokens), 10M (25M",
        ),
    ],
)
def test_verdict_along_d_is_inconclusive_without_the_data_for_it(kwargs, fragment):
    """Two budgets per size cannot show a trend; an LR at the edge of its grid at any compared
    budget makes the D verdict inconclusive, naming the cell and the LR to add."""
    table = make_nd_study(
        {"linear": BASE, "nonlinear": FADES_ALONG_D}, sizes=(2e6, 1e7, 1e8), **kwargs
    )
    verdict = analyse(table, table_judgement("linear", num_resamples=50)).verdict
    (row,) = verdict["tokens"]["variants"]
    assert row["verdict"] == "inconclusive" and fragment in row["reason"], row["reason"]
