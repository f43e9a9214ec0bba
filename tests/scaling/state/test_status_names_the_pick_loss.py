"""`scaling status` names the loss the LR search picks the best LR on (issue 55, item 17): the
selection windows' `val/select` when the study has some, `val/loss` itself with
`num_select_windows: 0` (it said `best LR by val/select` there too)."""

from __future__ import annotations

import pytest
import yaml

from scaling.driver.environment import load_study_spec
from scaling.lr_search.extend_grid import status_lines
from scaling.state.status import study_status
from tests.scaling.conftest import one_size_spec

SEARCH = {"max_rounds": 2, "scan_seeds": 1, "follow_neighbours": 1}


@pytest.mark.parametrize(
    ("num_select", "line"),
    [
        (0, "lr search: best LR by val/loss (num_select_windows: 0, no selection set)"),
        (2, "lr search: best LR by val/select (not val/loss)"),
    ],
)
def test_status_names_the_loss_the_best_lr_is_picked_on(
    tmp_path, data_dir, mlflow_server, num_select, line
):
    spec = one_size_spec(data_dir, tmp_path / "study", mlflow_server, 4, seeds=[0, 1])
    spec["lr"] = {"law": "none", "grid": {"linear": {"30K": [1e-3, 1e-2]}}, "search": SEARCH}
    spec["variants"] = ["linear"]
    spec["verdict"] = {"baseline": "linear"}
    spec["data"]["num_select_windows"] = num_select
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    study = load_study_spec(path, check_environment=False)
    lines = status_lines(study, study_status(study))
    assert lines[1] == line, lines
