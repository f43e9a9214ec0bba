"""The LR search's and the looks' run table (`scan_table`) is assembled row by row with the
report's (`analysis.tables.study_table.run_record`), so it keeps `flops_counted`: the FLOPs guard
of a variant that declared none is on at a look as in the report. Nothing trains."""

from __future__ import annotations

import pytest
import yaml

from analysis.stats.matched import weights_only_arms
from analysis.tables.study_table import STUDY_COLUMNS, run_record, run_state
from foundation import contract
from scaling.rounds.environment import load_study_spec
from scaling.rounds.refine import scan_table
from scaling.state.run_cache import CellRun
from scaling.state.status import StatusRow
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
            StatusRow(cell.cell_id, cell.size, cell.variant, cell.seed, cell.lr,
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
