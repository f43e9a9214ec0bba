"""`scaling plan --noise`'s `cost vs naive` line (scaling.costs.naive): the study's expected
device-hours against 3 LRs x the fixed seeds of equal power at the margin, at every arm and size,
checked against the plan's own per-cell costs."""

from __future__ import annotations

import math
import re
from pathlib import Path

import yaml

from analysis.stats.looks.seq_cost import expected_seeds
from analysis.stats.looks.sequential import Design
from analysis.stats.planning.power import mde, power_of, seeds_needed
from scaling.costs.plan import plan_study
from scaling.spec.loader import read_study
from tests.scaling.conftest import small_spec
from tests.scaling.costs.test_plan_seeds import _plan, close

NUMBER = r"([0-9][0-9,]*\.?[0-9]*(?:e[-+][0-9]+)?)"
LINE = rf"cost vs naive: {NUMBER}× \(expected {NUMBER} CPU-h: .*; naive {NUMBER} CPU-h at equal "
LINE += rf"power: 3 LRs × {NUMBER} fixed seeds"
MULTIPLIERS = [0.5, 1.0, 2.0]
SHAPES = {
    "30K": {"num_layers": 1, "hidden_size": 48, "num_attention_heads": 2},
    "60K": {"num_layers": 2, "hidden_size": 48, "num_attention_heads": 2},
    "90K": {"num_layers": 3, "hidden_size": 48, "num_attention_heads": 2},
}


def _write(tmp_path: Path, data_dir: Path, name: str, **overrides) -> Path:
    spec = small_spec(data_dir, tmp_path / name, f"sqlite:///{tmp_path}/m.db", **overrides)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _line(output: str) -> tuple[float, float, float, int]:
    """(ratio, expected, naive, fixed seeds) as printed."""
    match = re.search(LINE, output)
    assert match, f"no cost vs naive line in:\n{output}"
    ratio, expected, naive, seeds = (float(g.replace(",", "")) for g in match.groups())
    return ratio, expected, naive, int(seeds)


def _table_row(output: str, size: str) -> list[str]:
    """The power table's cells for ``size``, as printed."""
    line = next(x for x in output.splitlines() if x.strip().startswith(f"│ {size} "))
    return [cell.strip() for cell in line.strip().strip("│").split("│")]


def _point(path: Path) -> dict[tuple[str, str], float]:
    """CPU-hours of one run of each (size, arm), from the plan's rows (every size in round 0)."""
    study = read_study(path)
    out: dict[tuple[str, str], float] = {}
    for cell, row in zip(study.cells, plan_study(study).rows, strict=True):
        assert cell.round == 0
        assert math.isclose(out.setdefault((row.size, row.variant), row.gpu_hours), row.gpu_hours)
    return out


def test_a_fixed_seed_study_against_3_lrs_at_its_own_seed_count(tmp_path, data_dir):
    """4 listed seeds, seed 0 scans 3 LRs and seeds 1-3 follow at the winner only: 3 + 3 = 6
    runs per (arm, size) expected; naive 3 LRs x 4 seeds (4 fixed seeds have its own power), so
    the ratio is 6 / 12. Without --noise no line; nor for a fixed grid without a search."""
    search = {"max_rounds": 2, "scan_seeds": 1, "follow_neighbours": 0}
    lr = {"law": "porian", "multipliers": MULTIPLIERS, "search": search}
    path = _write(tmp_path, data_dir, "fixed", seeds=[0, 1, 2, 3], lr=lr)
    point = sum(_point(path).values())  # one run of every (arm, size)

    out = _plan(path, "--noise", "0.3")
    ratio, expected, naive, seeds = _line(out)
    assert seeds == 4
    assert close(expected, (3 + 3) * point) and close(naive, 3 * 4 * point)
    assert abs(ratio - 0.5) < 0.006
    assert "the starting grid and 3 follower seed(s), no edge round" in out
    assert f"power {power_of(0.5, 0.3, 4):.3f} at the 0.5% margin (its fixed seeds'" in out

    assert "cost vs naive" not in _plan(path)  # needs --noise
    grid = _write(tmp_path, data_dir, "grid", seeds=[0, 1], lr={"multipliers": MULTIPLIERS})
    assert "cost vs naive" not in _plan(grid, "--noise", "0.3")  # a fixed grid is the naive


def test_sequential_seeds_in_waves_at_the_designs_power(tmp_path, data_dir):
    """`seeds: {start 3, max 7, step 2}` with `transfer: law` on 3 sizes (the first wave 30K and
    60K): expected = the first wave's grid (seed 0 at 3 LRs), seeds 1-2 at each winner at every
    size, 90K at 3 LRs by seed 0 (2 on the law, 1 past the winner's edge), and the looks' seeds
    at 90K at a gain equal to the margin;
    naive = 3 LRs x the fixed seeds whose power at the margin reaches the design's simulated."""
    seeds = {"start": 3, "max": 7, "step": 2}
    search = {"max_rounds": 2, "scan_seeds": 1, "follow_neighbours": 0}
    common = {"seeds": seeds, "sizes": list(SHAPES), "ladder": {"shapes": SHAPES}}
    common["tokens"] = {"per_size": dict.fromkeys(SHAPES, 3072)}
    lr = {"law": "porian", "multipliers": MULTIPLIERS}
    waves = search | {"transfer": "law", "law_sizes": 2}
    path = _write(tmp_path, data_dir, "waves", **common, lr=lr | {"search": waves})
    # the same study without transfer: every size in its starting grid, priced by hand
    point = _point(_write(tmp_path, data_dir, "all", **common, lr=lr | {"search": search}))
    at = {size: sum(h for (s, _), h in point.items() if s == size) for size in SHAPES}

    out = _plan(path, "--noise", "0.3")
    ratio, expected, naive, num_seeds = _line(out)
    sim = expected_seeds(Design(3, 7, 2, 0.5), 0.5, 0.3)
    hand = 3 * (at["30K"] + at["60K"]) + 2 * sum(at.values()) + 3 * at["90K"]
    hand += (sim.mean_top_seeds - 3) * at["90K"]
    n = next(n for n in range(2, 1000) if power_of(0.5, 0.3, n) >= sim.claim_rate)
    assert num_seeds == n
    assert close(expected, hand) and close(naive, 3 * n * sum(at.values()))
    assert abs(ratio - hand / (3 * n * sum(at.values()))) < 0.006
    assert "90K at 3 LRs per arm (each arm's LR law holding: 2 on the law, 1 past the" in out
    assert f"{sim.mean_top_seeds:.2f} seeds at 90K on average at a 0.5% gain" in out
    assert f"power {sim.claim_rate:.3f} at the 0.5% margin (the design's, simulated" in out


def test_a_finished_study_as_noise_brings_its_lr_grids_resolution(tmp_path, data_dir):
    """`--noise` a run CSV with LR sweeps: the LR grid's term the verdict would read from those
    runs (`analysis.stats.analyze.grid_terms`, at the source size nearest the top) enters the
    looks' simulation (their seeds and power), and the naive grid is priced at the power on the
    seeds alone, both printed; a number as --noise has no runs, so no term."""
    from analysis.judgement import table_judgement
    from analysis.stats.analyze import grid_terms
    from analysis.stats.planning.power import noise_from_table
    from analysis.synthetic.scenarios import NOISES, noisy_study
    from analysis.tables.runs import load_csv

    csv = tmp_path / "runs.csv"
    noisy_study(1.0, NOISES["model"], rng_seed=9000).to_csv(csv, index=False)
    table = load_csv(csv)
    # the plan's sizes (30K-90K) are all nearest the source's smallest, 1.2M
    tune_var = grid_terms(table, table_judgement("linear"))["1.2M"]
    sd = noise_from_table(table, "linear")["1.2M"]
    assert tune_var > 0
    seeds = {"start": 3, "max": 7, "step": 2}
    search = {"max_rounds": 2, "scan_seeds": 1, "follow_neighbours": 0}
    common = {"seeds": seeds, "sizes": list(SHAPES), "ladder": {"shapes": SHAPES}}
    common["tokens"] = {"per_size": dict.fromkeys(SHAPES, 3072)}
    lr = {"law": "porian", "multipliers": MULTIPLIERS, "search": search}
    path = _write(tmp_path, data_dir, "grid-term", **common, lr=lr)

    out = _plan(path, "--noise", str(csv))
    design = Design(3, 7, 2, 0.5)
    with_term = expected_seeds(design, 0.5, sd, tune_var=tune_var)
    alone = expected_seeds(design, 0.5, sd)
    assert with_term.claim_rate <= alone.claim_rate  # the term only widens the test
    _, _, _, num_seeds = _line(out)
    assert num_seeds == next(n for n in range(2, 1000) if power_of(0.5, sd, n) >= alone.claim_rate)
    grid_sd = f"{math.sqrt(tune_var):.3g}%"
    assert (
        f"power {alone.claim_rate:.3f} on the seeds alone at the 0.5% margin" in out
        and f"{with_term.claim_rate:.3f} with the LR grid's resolution, sd {grid_sd} in the test"
        in out
    ), out
    assert f"{with_term.mean_top_seeds:.2f} seeds at 90K on average at a 0.5% gain" in out
    assert f"with the LR grid's resolution the verdict reads from {csv}: sd {grid_sd}" in out
    # the per-size power table carries the same term, as the verdict's test does: on the seeds
    # alone 4 seeds would detect a 0.1% gain; with the term no number of seeds does
    assert seeds_needed(sd, 0.1) == 4 and seeds_needed(sd, 0.1, tune_var=tune_var) is None
    row = _table_row(_plan(path, "--noise", str(csv), "--target-gain", "0.1"), "90K")
    num = int(row[4])
    assert row[3] == grid_sd and row[5] == f"{mde(sd, num, tune_var=tune_var):.3g}%"
    assert row[6] == "none at this LR grid"

    number = _plan(path, "--noise", f"{sd}")
    assert "LR grid's resolution" not in number
    assert "LR grid sd" not in number
    assert _table_row(_plan(path, "--noise", f"{sd}", "--target-gain", "0.1"), "90K")[5] == "4"
    assert f"power {alone.claim_rate:.3f} at the 0.5% margin (the design's, simulated" in number
