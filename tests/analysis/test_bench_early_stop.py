"""benchmarks/bench_early_stop.py: its synthetic world holds the truth it was drawn with and
bends the early ranking the way the literature says; its demo reader ranks LRs from a real
SQLite MLflow store and leaves it unchanged."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import numpy as np

from foundation import contract

BENCH = Path(__file__).parents[2] / "benchmarks" / "bench_early_stop.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_early_stop", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_the_world_keeps_its_optimum_and_bends_early_rankings_as_published():
    bench = _bench()
    rng = np.random.default_rng(0)
    assert bench.check_world(50, rng) < 0.01  # the final loss's minimum is the drawn eta*
    rows = {(r["source"], r["reading"]): r for r in bench.synthetic_rows(500, rng)}
    for frac in ("25%", "50%"):
        # a high LR looks worse while it is high: misses pick a lower LR (Hägele et al.)
        for kind in ("cosine", "wsd stable"):
            row = rows[(f"synthetic {kind}, noise 0.15%", f"loss at {frac}")]
            assert row["lower"] > 0.9 * (row["arms"] - row["agree"]) > 0
        # a short cooled run favours a higher LR (Bjorck et al.): misses pick a higher one
        row = rows[("synthetic wsd branch, noise 0.15%", f"loss at {frac}")]
        assert row["lower"] < 0.1 * (row["arms"] - row["agree"])
    for row in rows.values():  # more noise, less agreement between two full runs
        assert 0 < row["ceiling"] < 1


def _log_arm(client, experiment_id: str, size: str, finals: list, earlies: list) -> None:
    """Seed 0 of (linear, size) at LRs 1e-3, 2e-3, 4e-3: `earlies` the losses at 50%
    (val/select at step 300, train/loss around it), `finals` at 600."""
    from mlflow.entities import Metric

    for lr, early, final in zip((1e-3, 2e-3, 4e-3), earlies, finals, strict=True):
        tags = {contract.TAG_VARIANT: "linear", contract.TAG_SIZE: size, contract.TAG_SEED: "0"}
        tags |= {contract.TAG_LR: str(lr), contract.TAG_OUTCOME: contract.COMPLETED}
        run = client.create_run(experiment_id, tags=tags)
        metrics = [Metric(contract.FINAL_SELECT_LOSS, final, 0, 0)]
        metrics += [Metric(contract.VAL_SELECT, v, 0, s) for s, v in ((300, early), (600, final))]
        for step in range(20, 601, 20):
            value = early + 1.0 if step < 300 else (early if step < 450 else final)
            metrics.append(Metric(contract.TRAIN_LOSS, value, 0, step))
        client.log_batch(run.info.run_id, metrics=metrics)
        client.set_terminated(run.info.run_id)


def test_the_demo_reader_ranks_each_arm_and_leaves_the_store_as_it_was(tmp_path):
    """Two arms: one whose early ranking holds, one whose high LR wins only at the end."""
    import mlflow

    bench = _bench()
    study = tmp_path / "demo"
    study.mkdir()
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{study / 'mlflow.db'}")
    experiment_id = client.create_experiment("demo-copy")
    _log_arm(client, experiment_id, "12K", finals=[2.0, 2.1, 2.2], earlies=[3.0, 3.1, 3.2])
    _log_arm(client, experiment_id, "25K", finals=[2.2, 2.1, 2.0], earlies=[3.0, 3.1, 3.2])
    (study / "tracking_store.json").write_text(json.dumps({"experiment": "demo-copy"}))
    before = hashlib.sha256((study / "mlflow.db").read_bytes()).hexdigest()

    arms = bench.demo_arms(study)
    assert [a["arm"] for a in arms] == [("linear", "12K", "0"), ("linear", "25K", "0")]
    rows = {r["reading"]: r for r in bench.demo_rows(arms)}
    assert (rows["val/select at 50%"]["agree"], rows["val/select at 50%"]["lower"]) == (1, 1)
    assert (rows["train loss at 50%"]["agree"], rows["train loss at 50%"]["arms"]) == (1, 2)
    assert rows["train loss at 100% (the proxy's own check)"]["agree"] == 2
    assert hashlib.sha256((study / "mlflow.db").read_bytes()).hexdigest() == before
