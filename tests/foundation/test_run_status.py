"""One vocabulary from MLflow run status to cell state, read by `scaling` and `analysis` alike."""

from __future__ import annotations

import pytest
from mlflow.entities import Metric, Run, RunData, RunInfo, RunTag

from analysis.tables import mlflow_io
from foundation import contract as C
from scaling.state.run_cache import CellRun
from scaling.state.status import cell_state

UNFINISHED = ("SCHEDULED", "RUNNING", "FAILED", "KILLED")


def _mlflow_run(status: str, outcome: str = "completed") -> Run:
    info = RunInfo(
        run_id="r",
        experiment_id="0",
        user_id="u",
        status=status,
        start_time=0,
        end_time=None,
        lifecycle_stage="active",
    )
    tags = [RunTag(C.TAG_OUTCOME, outcome)]
    return Run(info, RunData(metrics=[Metric(C.FINAL_VAL_LOSS, 3.0, 0, 0)], tags=tags))


def _cell_run(status: str) -> CellRun:
    return CellRun("r", status, "completed", 3.0, 3.0, 0, None)


def test_the_mapping():
    assert C.RUN_STATUS_STATES == {
        "SCHEDULED": C.RUNNING,
        "RUNNING": C.RUNNING,
        "FINISHED": None,
        "FAILED": C.FAILED,
        "KILLED": C.CANCELLED,  # `scaling cancel` or Ctrl-C: stopped, not broken
    }
    with pytest.raises(ValueError, match="'LOST' is not one of SCHEDULED"):
        C.run_status_state("LOST")


@pytest.mark.parametrize("status", ["FINISHED", *UNFINISHED])
def test_both_packages_agree(status):
    """The same run reads as the same state in `scaling status` and the analysis table, but
    for one rule of scaling's own: a run that says it runs with no live job has died."""
    expected = C.run_status_state(status) or C.COMPLETED
    analysis_state = mlflow_io._status(_mlflow_run(status))
    scaling_state = cell_state(_cell_run(status), None)
    assert analysis_state == expected
    assert scaling_state == (C.FAILED if expected == C.RUNNING else expected)


@pytest.mark.parametrize("status", UNFINISHED)
def test_both_packages_read_the_contract(monkeypatch, status):
    """Changing the contract's mapping changes both readers: neither keeps a copy of its own."""
    monkeypatch.setitem(C.RUN_STATUS_STATES, status, C.STALE)  # a state no copy would hold
    assert mlflow_io._status(_mlflow_run(status)) == C.STALE
    assert cell_state(_cell_run(status), None) == C.STALE
