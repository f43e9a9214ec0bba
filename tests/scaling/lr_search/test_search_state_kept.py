"""`lr_search.json` deleted or changed under a running driver (issue 55, case 15).

Deleted, it is written again from what the driver wrote last, at the driver's next status
poll: its next round does not start the search over (past `max_rounds`), and `status` from
another shell does not hide the cells the search added. Changed, the driver stops with one line
(a `ConfigError`), judging and submitting nothing with a state it did not write.
"""

from __future__ import annotations

import pytest

from scaling.driver.round_driver import StudyRun
from scaling.spec.loader import resolve
from scaling.state.files.search_state import (
    AddedLR,
    SearchState,
    SearchStateChanged,
    read_state,
    state_path,
    write_state,
)
from tests.scaling.conftest import lr_search_spec
from tests.scaling.helpers import write_and_load


def test_a_deleted_search_state_is_written_again_and_a_changed_one_stops(
    tmp_path, data_dir, mlflow_server
) -> None:
    spec = lr_search_spec(data_dir, tmp_path / "study", mlflow_server, max_rounds=1)
    study = write_and_load(spec, tmp_path / "study.yaml")
    # what the driver's first round wrote: one LR added past the linear arm's edge
    added = AddedLR("linear", "30K", 12 * 256, 1e-1, [0], 1, "best LR at the grid's edge")
    ours = SearchState([added], ended=True)
    write_state(study.folder, ours)
    study = resolve(study.spec)
    grown = {c.cell_id for c in study.cells}
    said: list[str] = []
    run = StudyRun(study, say=said.append)

    state_path(study.folder).unlink()  # a user deletes it mid-round
    rows = run.status()
    assert read_state(study.folder) == ours, said
    assert {r.cell_id for r in rows} == grown
    assert {c.cell_id for c in resolve(study.spec).cells} == grown  # another shell's `status`
    assert len(said) == 1 and "was deleted while this driver ran" in said[0], said

    write_state(study.folder, SearchState())  # a user empties it: the search would restart
    with pytest.raises(SearchStateChanged, match="changed while this driver ran"):
        run.status()
    with pytest.raises(SearchStateChanged):  # a poll during a round stops too, not retried
        run.watcher.unavailable(SearchStateChanged("x"))
