"""A look is judged once, in `analysis.stats.looks.sequential.decide_look`: the `Look` it returns
holds its level, each variant's word, top-size gain and interval at that level, and the cells its
seeds add (each arm at its chosen LR), so `scaling.looks.sequential_seeds` only writes and logs
it."""

from __future__ import annotations

import json

from analysis.judgement import table_judgement
from analysis.stats.looks.sequential import Design, decide_look
from analysis.stats.lr.frontier import lr_frontier
from analysis.synthetic.studies import Effect, make_study

DESIGN = Design(start=3, max=7, step=2)
LOOKS_JSON_KEYS = [  # an entry of looks.json, in the order the file has always had
    "look", "info_fraction", "num_paired_top", "z", "level", "verdict", "stop", "verdicts",
    "reason", "add_seeds", "round", "top_gain_pct", "added", "baseline",
]  # fmt: skip


def test_a_look_holds_its_gains_and_the_cells_it_adds():
    sizes = (2e7, 3e7, 5e7, 1e8)  # each LR optimum (Porian) inside the grid below
    lrs = (0.002, 0.006, 0.018)
    table = make_study(
        {"linear": Effect(), "nonlinear": Effect(1.02)}, sizes, num_seeds=3, lrs=lrs, rng_seed=1
    )
    look = decide_look(table, table_judgement("linear", num_resamples=200, design=DESIGN), 1)
    assert not look.stop and look.add_seeds, look.reason

    assert set(look.top_gains) == set(look.verdicts) == {"nonlinear"}
    gain = look.top_gains["nonlinear"]
    assert gain["size"] == "100M" and gain["lo"] < gain["estimate"] < gain["hi"]

    chosen = {(f.variant, f.size): f.best_lr for f in lr_frontier(table)}
    assert {(a["variant"], a["size"]) for a in look.added} == {
        (v, s) for s in look.add_seeds for v in ("linear", "nonlinear")
    }
    for cell in look.added:
        assert cell["seeds"] == [3, 4] and cell["lr"] == chosen[(cell["variant"], cell["size"])]

    entry = json.loads(json.dumps(look.entry(2, "linear")))  # as looks.json holds it
    assert list(entry) == LOOKS_JSON_KEYS
    assert entry["top_gain_pct"] == look.top_gains and entry["baseline"] == "linear"
    assert entry["added"] == [dict(a) for a in look.added]
