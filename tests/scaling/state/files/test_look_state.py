"""`looks.json` (the sequential seeds' state): what the loader expands, what a broken file gets,
and how a look shows in the live bar. The looks themselves run in test_looks_e2e.py."""

from __future__ import annotations

import json

import pytest
import yaml

from foundation import contract as C
from scaling.driver.environment import load_study_spec
from scaling.driver.progress import Progress
from scaling.spec.grid import Cell
from scaling.spec.loader import looks_over
from scaling.state.files.look_state import write_looks
from scaling.state.status import StatusRow
from tests.scaling.conftest import small_spec

DESIGN = {"start": 3, "max": 5, "step": 2}


def _study(tmp_path, data_dir):
    spec = small_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path / 'mlflow.db'}")
    spec["seeds"] = DESIGN
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _look(stop: bool, added: list[dict]) -> dict:
    return {
        "look": 1,
        "round": 1,
        "info_fraction": 0.6,
        "num_paired_top": 3,
        "z": 2.53,
        "level": 0.0114,
        "verdict": "undetected",
        "verdicts": {"nonlinear": "undetected"},
        "stop": stop,
        "reason": "look 1: undetected, not decided; +2 at 60K",
        "add_seeds": {"60K": 2} if added else {},
        "top_gain_pct": {},
        "added": added,
    }


def test_the_loader_expands_a_looks_seeds_at_their_lr_through_the_grid(tmp_path, data_dir):
    path = _study(tmp_path, data_dir)
    study = load_study_spec(path)
    lr = next(c.lr for c in study.cells if c.size == "60K" and c.variant == "nonlinear")
    added = [{"variant": "nonlinear", "size": "60K", "tokens": 3072.0, "lr": lr, "seeds": [3, 4]}]
    write_looks(study.folder, {"design": DESIGN, "looks": [_look(False, added)]})
    grown = load_study_spec(path)
    new = [c for c in grown.cells if c.cell_id not in {d.cell_id for d in study.cells}]
    assert sorted((c.variant, c.size, c.seed, c.round) for c in new) == [
        ("nonlinear", "60K", 3, 1),
        ("nonlinear", "60K", 4, 1),
    ]
    assert all(c.run.tracking.tags[C.TAG_ROUND] == "1" for c in new)
    assert not looks_over(grown.spec)
    write_looks(study.folder, {"design": DESIGN, "looks": [_look(True, [])]})
    assert looks_over(load_study_spec(path).spec)


@pytest.mark.parametrize("text", ["{not json", json.dumps({"looks": [{"look": 1}]})])
def test_a_broken_looks_file_is_named_with_the_fix(tmp_path, data_dir, text):
    path = _study(tmp_path, data_dir)
    folder = load_study_spec(path).folder
    folder.mkdir(parents=True)
    (folder / "looks.json").write_text(text)
    with pytest.raises(ValueError) as err:
        load_study_spec(path)
    message = str(err.value)
    assert "looks.json: not a sequential-seeds state" in message
    assert "delete it to judge the looks again from the runs in MLflow" in message
    assert (folder / "looks.json").read_text() == text  # nothing written over it


def test_the_live_bar_names_the_look_within_80_columns():
    rows = [
        StatusRow(
            Cell(f"c{i}", "12K", "linear", i, 0.01, None),
            "running" if i < 24 else "queued",
            None,
            None,
            None,
        )
        for i in range(224)
    ]
    progress = Progress({r.cell_id: 1e9 for r in rows}, set(), slots=24, look=(3, "inconclusive"))
    brief = progress.brief(rows)
    assert brief.endswith("; L3"), brief  # no room for the word here
    few = rows[:3]
    assert progress.brief(few).endswith("; L3 inconclusive"), progress.brief(few)
    assert len("cells ━━━━━━━━ 0/224 ") + len(brief) <= 80, brief
    assert "look 3: inconclusive, running the seeds of look 4" in progress.summary(rows)
