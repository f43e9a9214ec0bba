"""The Ctrl-C line counts the study's cells as they are when it is pressed: an LR-search round
(or a look) added since start-up is counted, not the grid `scaling run` started with."""

from __future__ import annotations

from scaling.driver.environment import load_study_spec
from scaling.driver.run import interrupted_line
from scaling.state.files.search_state import AddedLR, SearchState, write_state
from tests.shipped import shipped_study


def test_the_interrupt_line_counts_the_cells_a_round_added_since_start_up(tmp_path):
    at_start = load_study_spec(shipped_study("demo", tmp_path), check_environment=False)
    assert len(at_start.cells) == 24
    added = [
        AddedLR("linear", "12K", 0.0, 0.192, [0], 1, "best at the upper edge"),
        AddedLR("nonlinear", "12K", 0.0, 0.096, [0], 1, "best at the upper edge"),
    ]
    write_state(at_start.folder, SearchState(added=added))  # round 1, written while it runs
    assert interrupted_line(at_start) == (
        "interrupted: 0 completed, 26 not started; run again to continue"
    )
