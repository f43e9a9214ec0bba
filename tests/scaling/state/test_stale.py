"""Editing a variant's code makes its finished cells stale; submit refuses until told what to do.

A user's own variant lives beside the study file (`python_path: src`, nothing exported in the
shell). After a first `submit`, its source is edited; `status` marks that arm's cell stale (the
linear one, whose code did not change, stays completed); `submit` refuses; `--rerun-stale`
trains it again as a new run and leaves the linear cell alone (`analyze` refuses the stale
results meanwhile, as `submit` does); after a second edit
`--accept-stale` keeps the result and records the choice on the run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from foundation import contract as C
from tests.scaling.conftest import one_size_spec

REPO = Path(__file__).resolve().parents[3]
ENTRY = "my_gated:gated_query"

pytestmark = pytest.mark.slow


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}  # not the variant's
    return subprocess.run(
        [sys.executable, "-m", "scaling", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _ok(*args: str, cwd: Path) -> str:
    proc = _cli(*args, cwd=cwd)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def _states(out: str) -> dict[str, str]:
    """cell id → state from a `scaling status` table."""
    states = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) > 2 and cells[1].startswith("30K-"):
            states[cells[1]] = cells[2].split(" ")[0]
    return states


def test_an_edited_variant_makes_its_cells_stale_until_rerun_or_accepted(
    tmp_path, data_dir, mlflow_server
):
    folder = tmp_path / "mystudy"
    (folder / "src").mkdir(parents=True)
    variant = folder / "src" / "my_gated.py"
    shutil.copy(REPO / "tests" / "variants" / "gated.py", variant)
    spec = one_size_spec(data_dir, Path("runs/tiny"), mlflow_server, steps=4)
    spec.update(name="tiny", python_path="src", variants=["linear", ENTRY])
    spec["lr"] = {"law": "none", "grid": {"linear": {"30K": [2e-3]}, "gated": {"30K": [2e-3]}}}
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    _ok("submit", str(path), cwd=elsewhere)
    first = _states(_ok("status", str(path), cwd=elsewhere))
    assert first == {"30K-linear-s0-lr0.002": "completed", "30K-gated-s0-lr0.002": "completed"}
    client = MlflowClient(mlflow_server)
    exp = client.get_experiment_by_name(spec["mlflow"]["experiment"])

    def runs() -> dict[str, object]:
        found = client.search_runs([exp.experiment_id], f"tags.{C.TAG_STUDY} = 'tiny'")
        return {r.data.tags[C.TAG_CELL_ID]: r for r in found if C.TAG_CELL_ID in r.data.tags}

    before = runs()
    assert all(len(r.data.tags[C.TAG_CODE_DIGEST]) == 16 for r in before.values())

    # the user's edit: the gate's pre-activation doubled
    source = variant.read_text()
    edited = source.replace("torch.sigmoid(gate)", "torch.sigmoid(2 * gate)")
    assert edited != source
    variant.write_text(edited)
    stale = _states(_ok("status", str(path), cwd=elsewhere))
    assert stale == {"30K-linear-s0-lr0.002": "completed", "30K-gated-s0-lr0.002": "stale"}

    refused = _cli("submit", str(path), cwd=elsewhere)
    assert refused.returncode == 2, refused.stdout[-2000:] + refused.stderr[-2000:]
    assert "30K-gated-s0-lr0.002" in refused.stderr and "--rerun-stale" in refused.stderr
    assert "--accept-stale" in refused.stderr
    assert runs().keys() == before.keys()  # nothing trained, nothing deleted
    # `analyze` judges no stale result either (issue 54, item 5): one line, the cell, its
    # variant and both fixes, exit 2, no report written
    analyzed = _cli("analyze", str(path), cwd=elsewhere)
    assert analyzed.returncode == 2, analyzed.stdout[-2000:] + analyzed.stderr[-2000:]
    (error,) = analyzed.stderr.strip().splitlines()
    assert error.startswith("error: study tiny: 1 finished cell(s)") and "30K-gated-s0" in error
    assert "gated" in error.split("; variants ")[1] and "`scaling analyze` judges no" in error
    assert "--rerun-stale" in error and "--accept-stale" in error
    assert not (folder / "runs" / "tiny" / "analysis").exists()

    _ok("submit", str(path), "--rerun-stale", cwd=elsewhere)
    rerun = runs()
    linear, gated = "30K-linear-s0-lr0.002", "30K-gated-s0-lr0.002"
    assert rerun[linear].info.run_id == before[linear].info.run_id  # not retrained
    assert rerun[gated].info.run_id != before[gated].info.run_id  # trained again, a new run
    assert rerun[gated].info.status == "FINISHED"
    assert rerun[gated].data.tags[C.TAG_CODE_DIGEST] != before[gated].data.tags[C.TAG_CODE_DIGEST]
    assert client.get_run(before[gated].info.run_id).info.lifecycle_stage == "deleted"
    assert set(_states(_ok("status", str(path), cwd=elsewhere)).values()) == {"completed"}

    variant.write_text(edited + "\n# a comment: the numbers cannot change\n")
    assert _states(_ok("status", str(path), cwd=elsewhere))[gated] == "stale"
    _ok("submit", str(path), "--accept-stale", cwd=elsewhere)
    accepted = runs()
    assert accepted[gated].info.run_id == rerun[gated].info.run_id  # kept, not retrained
    tags = accepted[gated].data.tags
    assert tags[C.TAG_CODE_ACCEPTED] != tags[C.TAG_CODE_DIGEST]
    assert set(_states(_ok("status", str(path), cwd=elsewhere)).values()) == {"completed"}
