"""verdict.json and the report record the model code each variant's runs trained with, and a
variant judged on two versions of its code is refused before anything is written (issue 36).

The demo's own runs (tests/analysis/demo_runs.csv, from `scaling run studies/demo.yaml`), with
code digests as the run table carries them (``analysis.tables.digests``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.entities import Metric, Run, RunData, RunInfo, RunTag

from analysis.api import run_analysis
from analysis.judgement import table_judgement
from analysis.tables.digests import judged_digests
from analysis.tables.mlflow_io import study_rows
from analysis.tables.runs import load_csv
from analysis.tables.study_table import run_table
from foundation import contract
from foundation.config import ConfigError

DEMO = Path(__file__).parents[1] / "demo_runs.csv"
OLD, NEW, LATER = "0123456789abcdef", "fedcba9876543210", "00112233aabbccdd"


def _demo_with_digests():
    """The demo's runs: linear all trained by NEW; nonlinear 4 runs from before digests were
    recorded and the rest by NEW; one nonlinear run failed, recorded under an OLD digest."""
    table = load_csv(DEMO)
    nonlinear = table.index[table["variant"] == "nonlinear"]
    table["code_digest"] = NEW
    table.loc[nonlinear[:4], "code_digest"] = ""
    table.loc[nonlinear[4], ["code_digest", "status", "final_val_loss"]] = [OLD, "failed", None]
    return table


def test_verdict_json_and_the_report_name_the_code_they_judged(tmp_path):
    verdict = run_analysis(
        _demo_with_digests(), table_judgement("linear", num_resamples=0), tmp_path
    )
    expected = {
        "linear": {"digests": {NEW: 12}, "num_runs": 12},
        "nonlinear": {"digests": {NEW: 7, "unrecorded": 4}, "num_runs": 11},  # not the failed
    }
    assert verdict["code_digests"] == expected
    assert json.loads((tmp_path / "verdict.json").read_text())["code_digests"] == expected
    report = (tmp_path / "report.md").read_text()
    assert (
        f"Model code judged (code digest per variant, one each): linear `{NEW}` (12 runs); "
        f"nonlinear `{NEW}` (7 runs), not recorded (4 runs)."
    ) in report


def test_a_variant_judged_on_two_versions_of_its_code_is_refused(tmp_path):
    table = _demo_with_digests()
    later = table.index[(table["variant"] == "nonlinear") & (table["code_digest"] == NEW)][:3]
    table.loc[later, "code_digest"] = LATER  # trained after the variant was edited
    table.loc[later[0], "status"] = "diverged"  # a result too: it is judged
    out = tmp_path / "analysis"
    # a refusal (ConfigError: one line, exit 2 from `scaling run`), never an inconclusive word
    with pytest.raises(ConfigError) as err:
        run_analysis(table, table_judgement("linear", num_resamples=0), out)
    message = str(err.value)
    assert f"variant nonlinear: {LATER} (3 run(s)), {NEW} (4 run(s)), unrecorded (4 run(s))" in (
        message
    )
    assert "linear:" not in message.replace("nonlinear:", "")  # one digest: not named
    assert "--rerun-stale" in message and "--accept-stale" in message
    assert not out.exists()  # nothing judged, nothing written


def _run(run_id: str, tags: dict[str, str]) -> Run:
    metrics = {contract.NUM_NONEMBEDDING_PARAMS: 1e5, contract.TOKENS: 1e6,
               contract.FINAL_VAL_LOSS: 4.0}  # fmt: skip
    tags = {contract.TAG_VARIANT: "linear", contract.TAG_SIZE: "100K", contract.TAG_SEED: "0",
            contract.TAG_LR: "0.001", contract.TAG_OUTCOME: contract.COMPLETED, **tags}  # fmt: skip
    info = RunInfo(run_id, "0", "u", "FINISHED", 0, None, "active")
    data = RunData([Metric(k, v, 0, 0) for k, v in metrics.items()], [],
                   [RunTag(k, v) for k, v in tags.items()])  # fmt: skip
    return Run(info, data)


def test_the_report_table_carries_the_digest_a_result_stands_for():
    runs = [
        _run("trained", {contract.TAG_CODE_DIGEST: NEW}),
        _run("accepted", {contract.TAG_CODE_DIGEST: OLD, contract.TAG_CODE_ACCEPTED: NEW}),
        _run("before_digests", {}),
    ]
    table = run_table(study_rows(runs, "s"), "test")
    assert dict(zip(table["run_id"], table["code_digest"], strict=True)) == {
        "trained": NEW,
        "accepted": NEW,  # `--accept-stale`: kept for today's code
        "before_digests": "",
    }
    assert judged_digests(table) == {
        "linear": {"digests": {NEW: 2, "unrecorded": 1}, "num_runs": 3}
    }
