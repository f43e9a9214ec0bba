"""`Study.resolve` end to end on the local executor: a tiny study (4 sizes, the fewest
`--resolve` takes, x 2 arms x 3 seeds at one LR each, 4 steps a cell) whose verdict is
unresolved, so the loop buys an extension, and an interrupt between recording the extension's
cells and training them.

One LR a size is a fixed recipe's design: every compared arm's best LR is unbracketed, so the
verdict is `inconclusive` whatever its interval says, and the one option that can resolve it is
the LRs past the edge (`lr_edge`: each size's LR halved and doubled, on its 3 seeds). Allowed
only seeds, the path buys nothing (`no option`): seeds cannot lift the guard.

The first call trains the grid, judges look 0 with the study's own analysis, declares the plan
and writes the extension's cells into `resolve.json`, then is interrupted (the round driver's
second round raises KeyboardInterrupt): the extension's cells are in the file, none has a run.
The rerun judges look 0 again on the same runs, decides the same extension, finds its cells and
trains only them, each once; the grid's cells are not submitted again. verdict.json and the
report carry the path, `analyze` judges as the resolve did (its last look's level, its path),
verdict.json's `resolve` prices its options in the plan's CPU-hours, `scaling status` prints the
best option and how the path ended, and a third call is refused: the path has ended.
"""

from __future__ import annotations

import json

import pytest
import yaml
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

import scaling.driver.resolve as resolve_driver
from analysis.report.sections.resolve import resolve_lines
from foundation import contract as C
from scaling.cli import app
from scaling.cli.status_command import open_question
from scaling.costs.plan import plan_study
from scaling.driver.resolve import ResolveRefused, ended_line
from scaling.study import Study
from tests.scaling.conftest import FOUR_SHAPES, one_size_spec

pytestmark = pytest.mark.slow


def _spec(tmp_path, data_dir) -> dict:
    sizes = list(FOUR_SHAPES)
    lr = {"law": "none", "grid": {"*": {s: [1e-2] for s in sizes}}}
    spec = one_size_spec(data_dir, tmp_path / "runs", f"sqlite:///{tmp_path}/mlflow.db", 4,
                         sizes=sizes, seeds=[0, 1, 2], lr=lr,
                         ladder={"shapes": FOUR_SHAPES})  # fmt: skip
    spec["tokens"] = {"per_size": {s: 4 * 256 for s in sizes}}
    spec["name"] = "resolve-e2e"
    return spec


def _runs_by_cell(study: Study) -> dict[str, list]:
    client = MlflowClient(study.resolved.mlflow.tracking_uri)
    exp = client.get_experiment_by_name(study.resolved.mlflow.experiment)
    runs: dict[str, list] = {}
    for run in client.search_runs([exp.experiment_id], max_results=1000):
        cid = run.data.tags.get(C.TAG_CELL_ID)
        if cid is not None:
            runs.setdefault(cid, []).append(run.info.run_id)
    return runs


def test_resolve_buys_an_extension_and_a_rerun_trains_nothing_twice(
    tmp_path, data_dir, monkeypatch
):
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(_spec(tmp_path, data_dir)))
    state = tmp_path / "runs" / "resolve.json"
    real_train = resolve_driver._Path.train
    trained: list[int] = []

    def interrupted(self):
        trained.append(1)
        if len(trained) == 2:  # the extension's round: its cells are written, none trained
            raise KeyboardInterrupt
        return real_train(self)

    monkeypatch.setattr(resolve_driver._Path, "train", interrupted)
    study = Study.load(path, writes=True)
    with pytest.raises(KeyboardInterrupt):
        study.resolve(1.0, max_looks=1)
    first = json.loads(state.read_text())
    assert first["plan"]["budget"] == 1.0 and first["plan"]["max_looks"] == 1
    assert first["path"] is None
    look0, look1 = first["looks"]
    assert look0["words"]["nonlinear"] in ("undetected", "inconclusive")
    bought = [c["cell_id"] for c in look1["cells"]]
    assert look1["bought"]["kind"] == "lr_edge" and len(bought) == 4 * 2 * 2 * 3, look1
    grid = _runs_by_cell(study)
    assert len(grid) == 24 and not set(bought) & set(grid)  # the grid trained; the buy not

    monkeypatch.setattr(resolve_driver._Path, "train", real_train)
    study = Study.load(path, writes=True)
    outcome = study.resolve(1.0, max_looks=1)
    runs = _runs_by_cell(study)
    assert all(len(ids) == 1 for ids in runs.values()), runs  # nothing trained twice
    assert {c: ids for c, ids in runs.items() if c in grid} == grid  # the grid's runs kept
    assert set(runs) == set(grid) | set(bought)
    again = json.loads(state.read_text())
    assert again["looks"][1]["cells"] == look1["cells"]  # the same path, continued
    assert again["looks"][0]["words"] == look0["words"]
    path_ = again["path"]
    assert path_["stopped"] in ("looks", "resolved") and len(path_["looks"]) == 2
    assert path_["looks"][1]["cells"] == bought and path_["spent"] > 0
    assert outcome.verdict["resolve_path"] == path_
    verdict = json.loads((outcome.report_dir / "verdict.json").read_text())
    assert verdict["resolve_path"]["looks"][1]["bought"]["kind"] == "lr_edge"
    report = (outcome.report_dir / "report.md").read_text()
    assert "## The resolve path" in report
    _priced_in_cpu_hours(verdict, study, again["looks"][1])
    assert {c.cell_id for c in study.resolved.cells} >= set(bought)  # status and plan see them

    # `scaling analyze STUDY` judges as the resolve did: its last look's level, its path
    analysed = Study.load(path).analyze().verdict
    assert analysed["resolve_path"] == path_
    levels = {row["decision"]["level"] for row in analysed["variants"]}
    assert levels == {verdict["variants"][0]["decision"]["level"]}
    _priced_in_cpu_hours(analysed, study, again["looks"][1])
    # `scaling status`: the best option after the verdict, and how the path ended, as said here
    lines = open_question(Study.load(path))
    assert lines == [*resolve_lines(analysed), ended_line(path_)], lines
    shown = CliRunner().invoke(app, ["status", str(path)], env={"COLUMNS": "500"})
    assert shown.exit_code == 0, shown.output
    assert set(lines) <= set(shown.output.splitlines()), shown.output  # printed whole, each

    with pytest.raises(ResolveRefused, match="has ended"):
        Study.load(path).resolve(1.0, max_looks=1, check_only=True)


def _priced_in_cpu_hours(verdict: dict, study: Study, bought: dict) -> None:
    """The extension was priced in the study's device-hours, as the plan prices its cells: its
    cost is the plan hours of the cells it bought (each arm's cell at each size; within 1%: the
    evidence gives both arms' cells the variant's N, 0.3% above the baseline's here; PFLOPs would
    be 500x more); verdict.json's `resolve`, if the verdict is still open, is in CPU-hours."""
    hours = {(r.variant, r.size): r.gpu_hours for r in plan_study(study.resolved).rows}
    want = sum(hours[c["variant"], c["size"]] for c in bought["cells"])
    assert bought["bought"]["num_runs"] == len(bought["cells"])
    assert bought["bought"]["cost"] == pytest.approx(want, rel=1e-2), (bought["bought"], want)
    found = verdict.get("resolve")
    if found is not None:
        assert found["unit"] == "CPU-hours", found["unit"]  # the local executor runs on CPUs
