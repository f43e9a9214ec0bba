"""`scaling status` while the user's variant file does not import (issue 54, "Progress and
failures"): the grid is shown, the broken arm's submitted cells marked with the file, the line
and the error, and a warning says why; before, status refused to show anything."""

from __future__ import annotations

from scaling.state.files.job_records import JobRecord, write_records
from tests.scaling.conftest import small_spec
from tests.scaling.helpers import gated_package, scaling_cli, write_and_load


def test_status_shows_the_grid_with_the_cells_of_a_variant_that_does_not_import(
    tmp_path, data_dir, monkeypatch
):
    variant = gated_package(tmp_path, "sbv")  # the user's own package, beside the study
    spec = small_spec(
        data_dir, tmp_path / "study", f"sqlite:///{tmp_path}/m.db",
        python_path="src", variants=["linear", "sbv.variants:gated_query"],
    )  # fmt: skip
    path = tmp_path / "study.yaml"
    study = write_and_load(spec, path)
    gated = sorted(c.cell_id for c in study.cells if c.variant == "gated")
    # the study as a submit left it: every cell has a job (local controllers long gone)
    study.folder.mkdir(parents=True)
    write_records(
        study.folder,
        {c.cell_id: JobRecord(c.cell_id, "local", "999999999", 0.0) for c in study.cells},
    )
    lines = variant.read_text().splitlines()
    broken_line = len(lines) + 1
    variant.write_text("\n".join([*lines, "raise RuntimeError('half-edited')", ""]))

    monkeypatch.setenv("COLUMNS", "300")  # one table row a line, as on a wide terminal
    out = scaling_cli("status", str(path), cwd=tmp_path).stdout
    note = f"variant file does not import: {variant}:{broken_line} RuntimeError: half-edited"
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in out.splitlines()
            if line.startswith("│")}  # fmt: skip
    assert {cid: rows.get(cid) for cid in gated} == dict.fromkeys(gated, note), out
    linear = [c.cell_id for c in study.cells if c.variant == "linear"]
    assert {cid: rows.get(cid) for cid in linear} == dict.fromkeys(linear, "pending"), out
    assert f"warning: variant 'sbv.variants:gated_query': {note}; " in out, out
