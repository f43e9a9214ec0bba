"""`scaling run` when no run of the baseline is usable (issue 39, D11): the analysis is a named
`inconclusive` line, not a traceback, and `run` exits 3 with every cell's result kept."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from scaling.cli import app
from scaling.cli.status_view import EXIT_CELLS_FAILED
from tests.scaling.conftest import one_size_spec


@pytest.mark.slow  # ~20-40 s: two tiny cells train, then the analysis runs
def test_a_study_whose_baseline_all_diverged_is_inconclusive_and_exits_3(tmp_path, data_dir):
    # the baseline's LR is finite but absurd: its run diverges (a result, not a failure)
    lr = {"law": "none", "grid": {"linear": {"30K": [1e30]}, "nonlinear": {"30K": [1e-3]}}}
    spec = one_size_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path / 'm.db'}", 6, lr=lr)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    result = CliRunner().invoke(app, ["run", str(path)])
    out = result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), out
    assert result.exit_code == EXIT_CELLS_FAILED, out
    assert "Traceback" not in out and "diverged" in out, out
    assert "analysis: inconclusive: no usable runs of the baseline 'linear'" in out, out
    assert "analysis inconclusive (exit status 3)" in out, out
