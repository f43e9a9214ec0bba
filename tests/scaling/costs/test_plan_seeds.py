"""`scaling plan` on `seeds: {start, max, step}`: the seed runs' minimum, expected and maximum
cost (scaling.costs.seeds), checked against the plan's own per-cell costs."""

from __future__ import annotations

import math
import re
from pathlib import Path

import yaml
from typer.testing import CliRunner

from analysis.stats.looks.seq_cost import expected_seeds
from scaling.cli import app
from scaling.costs.plan import plan_study
from scaling.costs.seeds import seed_cost
from scaling.spec.loader import read_study
from scaling.study_judgement import design_of
from tests.scaling.conftest import small_spec

ROUNDS = {"start": 3, "max": 7, "step": 2}
NUMBER = r"([0-9][0-9,]*\.?[0-9]*(?:e[-+][0-9]+)?)"


def _spec(tmp_path: Path, data_dir: Path, **overrides) -> Path:
    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path}/m.db", **overrides)
    spec["seeds"] = ROUNDS
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _plan(path: Path, *args: str) -> str:
    res = CliRunner().invoke(app, ["plan", str(path), "--no-check-environment", *args])
    assert res.exit_code == 0, res.output
    return res.output


def _figure(output: str, pattern: str) -> float:
    match = re.search(pattern.replace("{N}", NUMBER), output)
    assert match, f"{pattern!r} not in:\n{output}"
    return float(match.group(1).replace(",", ""))


def _hand(path: Path) -> tuple[float, dict[str, float]]:
    """(every round-0 cell's CPU-hours, one seed per arm at each size) from the plan's rows."""
    study = read_study(path)
    rows = plan_study(study).rows
    assert all(c.round == 0 for c in study.cells)
    per_seed = {s: 0.0 for s in study.spec.sizes}
    for variant in study.spec.variants:
        for size in study.spec.sizes:
            mine = [r for r in rows if r.variant == variant and r.size == size]
            assert len({round(r.gpu_hours, 15) for r in mine}) == 1  # LR does not change cost
            per_seed[size] += mine[0].gpu_hours
    return sum(r.gpu_hours for r in rows), per_seed


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=6e-3)  # the plan prints 3 significant digits


def test_min_expected_and_max_are_the_plans_arithmetic(tmp_path, data_dir):
    path = _spec(tmp_path, data_dir, lr={"law": "porian", "multipliers": [0.5, 1.0, 2.0]})
    out = _plan(path, "--noise", "0.3", "--target-gain", "1.0")
    grid, per_seed = _hand(path)
    study = read_study(path)
    assert study.spec.seeds == [0, 1, 2] and len(study.cells) == 3 * 3 * 2 * 2
    # no LR search: the first round is the whole grid (3 seeds x 3 LRs x 2 arms x 2 sizes);
    # a look's seed runs each arm once, at its chosen LR
    low = _figure(out, r"minimum {N} CPU-hours: 3 seeds at every size")
    high = _figure(out, r"maximum {N} CPU-hours: 7 seeds at every size")
    assert close(low, grid) and close(high, grid + 4 * sum(per_seed.values()))
    one_more = next(line for line in out.splitlines() if "one more seed" in line)
    for size in ("30K", "60K"):
        assert close(_figure(one_more, rf" {size} {{N}}"), per_seed[size])
    expected = _figure(out, r"expected {N} CPU-hours at a 1% gain")
    assert low < expected < high
    top = expected_seeds(_design(study), 1.0, 0.3).mean_top_seeds
    assert close(expected, grid + (top - 3) * per_seed["60K"])  # only the top size grows
    assert "looks at 3, 5, 7 paired seeds at 60K" in out
    assert "power (noise from 0.3)" in out  # the power table is still there


def _design(study):
    return design_of(study)  # the looks' own design: the one builder


def test_the_plan_prices_the_looks_at_the_studys_own_level(tmp_path, data_dir):
    """The plan's sequential design is the one the looks judge under (`design_of`), at the
    study's `verdict.alpha`, not the default level."""
    path = _spec(tmp_path, data_dir, verdict={"alpha": 0.01})
    study = read_study(path)
    design = seed_cost(study).design()
    assert design == design_of(study) and design.alpha == 0.01


def test_a_large_gain_costs_about_look_2_and_no_gain_follows_the_noise(tmp_path, data_dir):
    """Design 3/7/2 at a 1% gain with paired sd 0.3%: claimed at look 2 in ~90% of studies, so
    its cost is near the look-2 cost (5 seeds at the top). At no gain a small noise stops on
    equivalence by look 2; a large one runs to max."""
    path = _spec(tmp_path, data_dir)
    grid, per_seed = _hand(path)
    look = {n: grid + (n - 3) * per_seed["60K"] for n in (3, 5, 7)}

    out = _plan(path, "--noise", "0.3", "--target-gain", "1.0")
    large = _figure(out, r"expected {N} CPU-hours at a 1% gain")
    assert look[3] < large < look[7]
    assert abs(large - look[5]) < 0.1 * (look[5] - look[3])
    assert "claims it in 100% of studies" in out

    quiet = _figure(
        _plan(path, "--noise", "0.1", "--target-gain", "1.0"), r", {N} CPU-hours at no gain"
    )
    assert look[3] <= quiet <= look[5]  # equivalence at look 1 or 2
    noisy = _figure(
        _plan(path, "--noise", "5", "--target-gain", "1.0"), r", {N} CPU-hours at no gain"
    )
    assert noisy > look[5] + 0.9 * (look[7] - look[5])  # almost every null study runs to max


def test_the_lr_searchs_followers_are_in_the_first_round(tmp_path, data_dir):
    search = {"max_rounds": 1, "scan_seeds": 1, "follow_neighbours": 1}
    lr = {"law": "porian", "multipliers": [0.5, 1.0, 2.0], "search": search}
    path = _spec(tmp_path, data_dir, lr=lr)
    grid, per_seed = _hand(path)  # the starting grid: seed 0 at 3 LRs
    out = _plan(path)
    low = _figure(out, r"minimum {N} CPU-hours")
    # seeds 1 and 2 follow at the winner and one LR each side: 3 runs per arm each
    assert close(low, grid + 2 * 3 * sum(per_seed.values()))
    assert close(_figure(out, r"maximum {N} CPU-hours"), low + 4 * sum(per_seed.values()))
    assert "2 follower seed(s) at 3 LRs per arm" in out


def test_without_noise_the_expected_figure_says_what_it_needs(tmp_path, data_dir):
    path = _spec(tmp_path, data_dir)
    out = _plan(path)
    assert "minimum" in out and "maximum" in out
    assert "expected: needs --noise SOURCE and --target-gain PCT" in out
    out = _plan(path, "--noise", "0.3")  # no target: the figure at no gain only
    assert "at no gain" in out and "at a target gain: add --target-gain PCT" in out


def test_a_listed_seed_study_has_no_sequential_lines(tmp_path, data_dir):
    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path}/m.db", seeds=[0, 1, 2])
    path = tmp_path / "listed.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert "sequential seeds" not in _plan(path, "--noise", "0.3")
