"""A run that crashed before it logged its size (a job that died at start, a cell `submit` gave up
on, a branch whose parent failed) is read as a failed row of its arm, and the analysis of the
study is then exactly that of the same study with those runs failed.

Synthetic studies with a known truth (the "lucky survivor" scenario: a real constant gain, k =
1.5), three noise draws, written to a real MLflow server as cells log them; some cells are
written as crashed runs instead: FAILED or KILLED, with tags and no metrics.
"""

from __future__ import annotations

import json
import math
import uuid

import numpy as np
import pandas as pd
import pytest
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from analysis.judgement import table_judgement
from analysis.stats.analyze import analyse
from analysis.stats.lr.frontier import BRACKETED, lr_frontier
from analysis.synthetic.scenarios import EXPECTED, lr_opt, scenario
from analysis.tables.mlflow_io import load_study_runs
from foundation import contract
from tests.analysis.stats.test_scenarios import check_reason

pytestmark = pytest.mark.slow

GENERATOR_SEEDS = (11, 12, 13)
KEY = ["variant", "num_nonembedding_params", "lr", "seed"]


def _crashed(row: dict) -> bool:
    """Which cells crash: the variant's highest LR (4x its optimum) at every size, every seed,
    and one baseline seed at the lowest LR of the smallest size. Neither is an arm's best."""
    mult = row["lr"] / lr_opt(row["num_nonembedding_params"])
    if row["variant"] == "nonlinear":
        return mult > 3.0
    return mult < 0.3 and row["size"] == "1.2M" and row["seed"] == 1


def _write(client: MlflowClient, exp_id: str, study: str, row: dict, crashed: bool) -> str:
    tags = {
        contract.TAG_STUDY: study,
        contract.TAG_VARIANT: row["variant"],
        contract.TAG_SIZE: row["size"],
        contract.TAG_SEED: str(row["seed"]),
        contract.TAG_LR: f"{row['lr']:.6g}",
    }
    if crashed:  # created at submit, never started: tags only
        run = client.create_run(exp_id, tags=tags)
        status = "KILLED" if row["seed"] % 2 else "FAILED"
        client.set_terminated(run.info.run_id, status)
        return run.info.run_id
    outcome = contract.DIVERGED if row["status"] == "diverged" else contract.COMPLETED
    run = client.create_run(exp_id, tags=tags | {contract.TAG_OUTCOME: outcome})
    summary = {
        contract.NUM_NONEMBEDDING_PARAMS: row["num_nonembedding_params"],
        contract.TOKENS: row["tokens"],
        contract.FLOPS: row["flops"],
    }
    if not math.isnan(row["final_val_loss"]):
        summary[contract.FINAL_VAL_LOSS] = row["final_val_loss"]
    client.log_batch(run.info.run_id, metrics=[Metric(k, v, 0, 0) for k, v in summary.items()])
    client.set_terminated(run.info.run_id, "FINISHED")
    return run.info.run_id


def _ordered(table: pd.DataFrame) -> pd.DataFrame:
    return table.sort_values(KEY).reset_index(drop=True)


@pytest.mark.parametrize("rng_seed", GENERATOR_SEEDS)
def test_crashed_runs_count_as_failed_lrs_and_change_nothing_else(mlflow_server, rng_seed):
    truth = scenario("lucky_survivor", rng_seed)
    truth["lr"] = [float(f"{lr:.6g}") for lr in truth["lr"]]  # as the lr tag stores it
    client = MlflowClient(mlflow_server)
    name = f"crashed_{rng_seed}_{uuid.uuid4().hex[:8]}"
    exp_id = client.create_experiment(f"exp_{name}")
    crashed = [_crashed(r) for r in truth.to_dict("records")]
    ids = [
        _write(client, exp_id, name, r, c)
        for r, c in zip(truth.to_dict("records"), crashed, strict=True)
    ]
    # a crashed run of a size no run measured: nothing to size it by, so it is left out
    orphan = client.create_run(
        exp_id,
        tags={
            contract.TAG_STUDY: name,
            contract.TAG_VARIANT: "nonlinear",
            contract.TAG_SIZE: "999M",
        }
        | {contract.TAG_SEED: "0", contract.TAG_LR: "0.001"},
    )
    client.set_terminated(orphan.info.run_id, "FAILED")

    loaded, _ = load_study_runs(mlflow_server, f"exp_{name}", name)
    assert orphan.info.run_id not in set(loaded["run_id"])
    assert sorted(loaded["run_id"]) == sorted(ids)

    # the same study with those cells failed, written directly
    expected = truth.copy()
    expected.loc[crashed, "status"] = contract.FAILED
    expected.loc[crashed, "final_val_loss"] = np.nan
    got, want = _ordered(loaded), _ordered(expected)
    for col in ["size", "status", "num_nonembedding_params", "tokens", "seed", "lr"]:
        assert got[col].tolist() == want[col].tolist(), col
    assert np.allclose(got["final_val_loss"], want["final_val_loss"], equal_nan=True)
    assert np.allclose(got["flops"], want["flops"])  # a crashed row's: estimated as 6 N D
    assert (got["status"] == contract.FAILED).sum() == sum(crashed) == 5 * 4 + 1

    # the analysis of each is one and the same, and right for the truth
    a_got = analyse(got, table_judgement("linear", num_resamples=300, seed=rng_seed))
    a_want = analyse(want, table_judgement("linear", num_resamples=300, seed=rng_seed))
    (variant,) = a_got.verdict["variants"]
    assert json.dumps(a_got.verdict["variants"], sort_keys=True) == json.dumps(
        a_want.verdict["variants"], sort_keys=True
    )
    assert variant["verdict"] in EXPECTED["lucky_survivor"], variant["reason"]
    assert "gain" in check_reason(variant)  # the reason is true of the numbers beside it

    # every crashed LR is tried and not usable; every arm's best LR is still bracketed
    for f in lr_frontier(got):
        crashed_lrs = set(
            want[(want.variant == f.variant) & (want["size"] == f.size)].query(
                "status == 'failed'"
            )["lr"]
        )
        assert crashed_lrs <= set(f.lrs) and not crashed_lrs & set(f.usable_lrs)
        assert f.state in BRACKETED, f
    print(
        f"[crashed runs] draw {rng_seed}: {sum(crashed)} crashed runs, verdict "
        f"{variant['verdict']}: {variant['reason']}"
    )
