"""The LR search's and the looks' run table (`scan_table`) is assembled row by row with the
report's (`analysis.tables.study_table.run_record`), so it keeps `flops_counted`: the FLOPs guard
of a variant that declared none is on at a look as in the report. Nothing trains."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import yaml
from mlflow.entities import Metric, Run, RunData, RunInfo, RunTag

from analysis.stats.gains.matched import weights_only_arms
from analysis.tables.mlflow_io import study_rows
from analysis.tables.study_table import STUDY_COLUMNS, run_record, run_state, run_table
from foundation import contract
from scaling.driver.environment import load_study_spec
from scaling.lr_search.extend_grid import scan_table
from scaling.state.run_cache import CellRun
from scaling.state.status import StatusRow, cell_state
from tests.scaling.conftest import small_spec

UNDECLARED = "tests.models.test_flops_declared:undeclared"  # a query variant with no `flops`


def test_a_look_table_keeps_flops_counted_and_holds_an_undeclared_variant_back(tmp_path, data_dir):
    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path}/m.db")
    spec["variants"] = ["linear", UNDECLARED]
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = load_study_spec(path, check_environment=False)
    rows, runs = [], {}
    for i, cell in enumerate(study.cells):
        rows.append(
            StatusRow(cell,
                      contract.COMPLETED, 3.0, None, f"r{i}")
        )  # fmt: skip
        runs[cell.cell_id] = CellRun(f"r{i}", "FINISHED", "completed", 3.0 + i, 3.0, 0, None)
    table = scan_table(study, rows, runs)
    assert set(STUDY_COLUMNS) <= set(table.columns)
    counted = dict(zip(table["variant"], table["flops_counted"], strict=False))
    (arm,) = set(table["variant"]) - {"linear"}
    assert counted == {"linear": "exact", arm: "weights_only"}
    assert weights_only_arms(table) == [arm]  # what the verdict's guard reads


def test_one_state_mapping_and_no_row_without_every_column():
    assert run_state("FINISHED", "diverged", False) == contract.DIVERGED
    assert run_state("FINISHED", "completed", True) == contract.COMPLETED
    assert run_state("FINISHED", "completed", False) == contract.FAILED  # no final loss
    assert run_state("FINISHED", "running", True) == contract.FAILED  # never reported its end
    assert run_state("KILLED", None, False) == contract.CANCELLED
    fields = dict.fromkeys(STUDY_COLUMNS)
    del fields["flops_counted"]
    with pytest.raises(TypeError, match="missing \\['flops_counted'\\]"):
        run_record(**fields)


NUM_WORLDS = 200
COMPARED = ["variant", "size", "seed", "lr", "num_nonembedding_params", "tokens", "flops",
            "flops_counted", "code_digest", "final_val_loss", "select_val_loss",
            "status"]  # fmt: skip


def _mlflow_run(cell, run: CellRun, sized: bool, flops_counted: str) -> Run:
    """The MLflow record a job leaves for `cell` (tags and summary metrics, docs/interfaces.md)."""
    from models.accounting import num_nonembedding_params

    tags = {contract.TAG_VARIANT: cell.variant, contract.TAG_SIZE: cell.size,
            contract.TAG_SEED: str(cell.seed), contract.TAG_LR: repr(cell.lr),
            contract.TAG_CELL_ID: cell.cell_id, contract.TAG_FLOPS_COUNTED: flops_counted,
            contract.TAG_STUDY: "tiny-study"}  # fmt: skip
    if run.outcome is not None:
        tags[contract.TAG_OUTCOME] = run.outcome
    if run.code_digest is not None:
        tags[contract.TAG_CODE_DIGEST] = run.code_digest
    if run.code_accepted is not None:
        tags[contract.TAG_CODE_ACCEPTED] = run.code_accepted
    metrics = {}
    if sized:
        metrics.update({contract.NUM_NONEMBEDDING_PARAMS: num_nonembedding_params(cell.run.model),
                        contract.TOKENS: cell.tokens, contract.FLOPS: cell.flops})  # fmt: skip
    if run.final_val_loss is not None:
        metrics[contract.FINAL_VAL_LOSS] = run.final_val_loss
    info = RunInfo(run.run_id, "0", "u", run.status, 0, None, "active")
    data = RunData([Metric(k, float(v), 0, 0) for k, v in metrics.items()], [],
                   [RunTag(k, v) for k, v in tags.items()])  # fmt: skip
    return Run(info, data)


def _world(study, rng: np.random.Generator):
    """One study's ended cells: an LR optimum per arm that may sit at the grid's edge, a seed
    missing at one size, diverged and failed cells (some before they logged their size), code
    digests recorded, accepted or not recorded."""
    from models.accounting import flops_counted

    gone = (study.cells[int(rng.integers(len(study.cells)))].size, int(rng.integers(3)))
    cells = [c for c in study.cells if (c.size, c.seed) != gone]  # a missing seed
    optimum = {v: float(rng.choice([1e-4, 1e-3, 1e-2])) for v in {c.variant for c in cells}}
    rows, runs, records = [], {}, []
    for i, cell in enumerate(cells):
        kind = rng.choice(["ok", "ok", "ok", "ok", "diverged", "failed", "crashed", "killed",
                           "unlogged"])  # fmt: skip
        loss = 3.0 + (np.log(cell.lr / optimum[cell.variant])) ** 2 / 10 + rng.normal(0, 0.01)
        status, outcome = {"ok": ("FINISHED", "completed"), "diverged": ("FINISHED", "diverged"),
                           "failed": ("FAILED", "running"), "crashed": ("FAILED", None),
                           "killed": ("KILLED", "running"),
                           "unlogged": ("FINISHED", "completed")}[kind]  # fmt: skip
        final = loss if kind == "ok" else None
        # the code it trained with: not recorded (an old run), today's, or an older one that was
        # accepted for today's (`--accept-stale`)
        digest, accepted = [(None, None), ("today", None), ("older", "today")][int(rng.integers(3))]
        run = CellRun(f"r{i}", status, outcome, final, final, 0, None, None, digest, accepted)
        runs[cell.cell_id] = run
        state = cell_state(run, None)  # what `status` shows
        rows.append(StatusRow(cell, state,
                              final, None, run.run_id))  # fmt: skip
        records.append(_mlflow_run(cell, run, kind != "crashed", flops_counted(cell.run.model)))
    return dataclasses.replace(study, cells=tuple(cells)), rows, runs, records


def _comparable(table: pd.DataFrame) -> pd.DataFrame:
    """Rows by run id; an ended unusable row (failed, cancelled) compared by what the frontier
    reads of it (its arm, size, seed, LR and that it ended without a result)."""
    out = table.sort_values("run_id").reset_index(drop=True)[COMPARED].copy()
    dead = out["status"].isin([contract.FAILED, contract.CANCELLED])
    out.loc[dead, "status"] = "ended without a result"
    out.loc[dead, ["flops", "final_val_loss", "select_val_loss"]] = np.nan
    return out


@pytest.mark.slow
def test_the_looks_and_the_report_read_one_table_over_200_studies(tmp_path, data_dir):
    """200 synthetic studies' ended cells: the table a look reads (`scan_table`, from the cells
    and `status`'s states) equals the table the report reads (`study_rows`, from the MLflow
    records alone), so the look's word, the report's word and `status`'s (the look's, from
    looks.json) cannot differ: the analysis is a pure function of the table and the level.
    Seen: 200/200 equal, 17-22 s on 2 busy cores (slow: 200 studies' cells through the model
    accounting). A second table (the old `scan_table`, without `flops_counted`) fails it at
    world 0."""
    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path}/m.db")
    spec.update(variants=["linear", UNDECLARED], seeds=[0, 1, 2])
    spec["lr"] = {"multipliers": [0.5, 1.0, 2.0]}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = load_study_spec(path, check_environment=False)
    for i in range(NUM_WORLDS):
        world, rows, runs, records = _world(study, np.random.default_rng(i))
        look = _comparable(scan_table(world, rows, runs))
        report = _comparable(run_table(study_rows(records, "tiny-study"), "report"))
        pd.testing.assert_frame_equal(look, report, check_dtype=False, obj=f"world {i}")
