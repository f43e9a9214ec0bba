"""`scaling run STUDY --resolve --budget HOURS`: bad input is refused in one `error:` line naming
the flag or field and the fix, exit 2, before anything starts. "Nothing started" is read off
what the code did: the data is never prepared, no round is driven (both replaced here by a
recorder that fails the test), and the study folder, its MLflow store and its `resolve.json`
are as they were (absent, or byte for byte the same).
"""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

import scaling.driver.resolve as resolve_driver
from foundation import contract
from scaling.cli import app
from scaling.driver.round_driver import StudyRun
from tests.scaling.conftest import FOUR_SHAPES, one_size_spec

PLAN = {"budget": 2.0, "max_looks": 4, "alpha": 0.05, "kinds": ["seeds", "lr_grid"]}
PLAN |= {"max_seeds": None, "start_seeds": 3}


@pytest.fixture
def started(monkeypatch) -> list[str]:
    """What was started: every data preparation and round a refused resolve must never reach."""
    calls: list[str] = []

    def prepare(*_a, **_k):
        calls.append("prepare")
        raise AssertionError("data prepared by a refused resolve")

    def drive(*_a, **_k):
        calls.append("drive")
        raise AssertionError("a round driven by a refused resolve")

    monkeypatch.setattr(resolve_driver, "prepare_study_data", prepare)
    monkeypatch.setattr(StudyRun, "drive", drive)
    return calls


def _study(tmp_path, data_dir, **overrides):
    overrides = {"seeds": [0, 1], **overrides}
    spec = one_size_spec(data_dir, tmp_path / "runs", f"sqlite:///{tmp_path}/mlflow.db", 4,
                         **overrides)  # fmt: skip
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path, spec


def _refused(path, *args: str, starts: str) -> str:
    result = CliRunner().invoke(app, ["run", str(path), *args], env={"COLUMNS": "500"})
    out = result.output
    assert result.exit_code == 2, out
    assert "Traceback" not in out, out
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {starts}"), out
    return errors[0]


def _files(folder) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    "args, starts",
    [
        (["--resolve", "--budget", "0"], "--budget 0: "),
        (["--resolve", "--budget", "-1"], "--budget -1: "),
        (["--resolve", "--budget", "nan"], "--budget nan: "),
        (["--resolve", "--budget", "inf"], "--budget inf: "),
        (["--resolve", "--budget", "abc"], "--budget abc: "),
        (["--resolve"], "--resolve: give --budget HOURS"),
        (["--budget", "1"], "--budget: only with --resolve"),
        (["--resolve", "--budget", "1", "--max-looks", "0"], "--max-looks 0: "),
        (["--resolve", "--budget", "1", "--options", "tokens"], "--options tokens: "),
        (["--resolve", "--budget", "1", "--options", "size"], "--options size: "),
        (["--resolve", "--budget", "1", "--options", "more"], "--options more: not an option"),
    ],
)
def test_bad_flags_are_refused_before_anything_starts(tmp_path, data_dir, started, args, starts):
    path, _ = _study(tmp_path, data_dir)
    line = _refused(path, *args, starts=starts)
    assert "give" in line or "leave" in line or "drop" in line or "one of" in line  # the fix
    assert started == []
    assert not (tmp_path / "runs").exists() and not (tmp_path / "mlflow.db").exists()


def test_sequential_seeds_are_refused(tmp_path, data_dir, started):
    path, _ = _study(tmp_path, data_dir, seeds={"start": 3, "max": 5, "step": 2})
    _refused(path, "--resolve", "--budget", "1", starts="--resolve: this study has sequential")
    assert started == [] and not (tmp_path / "mlflow.db").exists()


def test_a_finished_resolved_study_is_refused(tmp_path, data_dir, started):
    path, spec = _study(tmp_path, data_dir)
    report = contract.analysis_folder(spec["name"], str(tmp_path / "runs"))
    report.mkdir(parents=True)
    verdict = {"variants": [{"variant": "nonlinear", "verdict": "none"}]}
    (report / "verdict.json").write_text(json.dumps(verdict))
    before = _files(tmp_path / "runs")
    line = _refused(path, "--resolve", "--budget", "1", starts="--resolve: tiny-study is finished")
    assert "nonlinear none" in line
    assert started == [] and _files(tmp_path / "runs") == before
    assert not (tmp_path / "mlflow.db").exists()


def test_a_plan_other_than_the_declared_one_is_refused(tmp_path, data_dir, started):
    path, _ = _study(tmp_path, data_dir)
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "resolve.json").write_text(json.dumps({"plan": PLAN, "looks": [], "path": None}))
    before = _files(folder)
    line = _refused(path, "--resolve", "--budget", "1", starts="--budget/--max-looks/--options:")
    assert "budget 2.0" in line
    _refused(path, "--resolve", "--budget", "2", "--max-looks", "3", starts="--budget/")
    assert started == [] and _files(folder) == before


def test_an_ended_path_is_refused(tmp_path, data_dir, started):
    path, _ = _study(tmp_path, data_dir)
    folder = tmp_path / "runs"
    folder.mkdir()
    ended = {"stopped": "resolved", "words": {"nonlinear": "helps"}}
    (folder / "resolve.json").write_text(json.dumps({"plan": PLAN, "looks": [], "path": ended}))
    before = _files(folder)
    line = _refused(path, "--resolve", "--budget", "2", starts="--resolve: the resolve path")
    assert "resolved: nonlinear helps" in line
    assert started == [] and _files(folder) == before


def test_too_few_sizes_for_any_verdict_but_inconclusive_are_refused(tmp_path, data_dir, started):
    """Fewer sizes than the rule judges a trend on: no seeds or LRs could resolve the verdict."""
    from analysis.stats.rules.verdict import MIN_SIZES

    path, _ = _study(tmp_path, data_dir)  # one size
    line = _refused(path, "--resolve", "--budget", "1", starts="--resolve: sizes has 1 (30K)")
    assert f">= {MIN_SIZES} sizes per arm" in line and "add sizes" in line
    assert started == [] and not (tmp_path / "runs").exists()
    assert not (tmp_path / "mlflow.db").exists()


def test_the_study_files_resolve_is_the_plan_and_each_flag_overrides_it(tmp_path, data_dir):
    """`resolve: {budget, max_looks, options}` in the study file declares the plan `--resolve`
    takes without flags; each flag given replaces its field; nothing is written by the check."""
    from scaling.study import Study

    declared = {"budget": 0.25, "max_looks": 2, "options": ["seeds"]}
    path, _ = _study(tmp_path, data_dir, sizes=list(FOUR_SHAPES), ladder={"shapes": FOUR_SHAPES},
                     tokens={"per_size": dict.fromkeys(FOUR_SHAPES, 1024)},
                     resolve=declared)  # fmt: skip
    study = Study.load(path)
    plan = study.resolve(check_only=True)
    assert (plan["budget"], plan["max_looks"], plan["kinds"]) == (0.25, 2, ["seeds"])
    plan = study.resolve(1.5, max_looks=3, kinds=("lr_grid",), check_only=True)
    assert (plan["budget"], plan["max_looks"], plan["kinds"]) == (1.5, 3, ["lr_grid"])
    assert not (tmp_path / "runs" / "resolve.json").exists()

    # a field left out is as a flag not given: the resolve's defaults
    spec = yaml.safe_load(path.read_text())
    spec["resolve"] = {"budget": 0.25}
    path.write_text(yaml.safe_dump(spec))
    plan = Study.load(path).resolve(check_only=True)
    assert (plan["budget"], plan["max_looks"], plan["kinds"]) == (
        0.25,
        4,
        ["seeds", "lr_grid", "lr_edge"],
    )
