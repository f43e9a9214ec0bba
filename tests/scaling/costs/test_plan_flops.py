"""`scaling plan` flags a bring-your-own variant that declares no FLOPs, before any training."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from scaling.cli import app
from tests.scaling.conftest import small_spec


def test_plan_warns_about_a_variant_without_declared_flops(tmp_path, data_dir):
    """... and says what its build check checked; a variant that fails to build gets its error
    alone, not the whole plan table before it (issue 54)."""
    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path}/m.db")
    path = tmp_path / "study.yaml"
    for entry, warned, checked in (
        ("tests.models.test_flops_declared:undeclared", True, "its FLOPs not checked"),
        ("tests.variants.gated:gated_query", False, "its forward FLOPs per token within 2%"),
    ):
        spec["variants"] = ["linear", entry]
        path.write_text(yaml.safe_dump(spec))
        res = CliRunner().invoke(app, ["plan", str(path), "--no-check-environment"])
        assert res.exit_code == 0, res.output
        said = f"warning: variant {entry!r} declares no FLOPs per token" in res.output
        assert said == warned, res.output
        assert " built and checked (" in res.output and checked in res.output, res.output

    spec["variants"] = ["linear", "tests.variants.broken:fails_to_build"]
    path.write_text(yaml.safe_dump(spec))
    res = CliRunner().invoke(app, ["plan", str(path), "--no-check-environment"])
    assert res.exit_code == 2, res.output
    # one line: the study file, the arm, its own file and line
    (line,) = [x for x in res.output.splitlines() if x.startswith("error:")]
    assert line.startswith(f"error: {path}: variant 'slip' (") and "broken.py" in line, line
    assert "building its model failed" in line and "broken.py:21" in line, line
    assert ": plan" not in res.output and "built and checked" not in res.output, res.output
