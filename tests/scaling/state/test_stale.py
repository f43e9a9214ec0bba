"""Editing a variant's code makes its finished cells stale; submit refuses until told what to do.

A user's own variant lives beside the study file (`python_path: src`, nothing exported in the
shell), in a package whose helper module does the multiply. After a first `submit`, only the
helper is edited; `status` marks that arm's cell stale and names the helper (the linear one,
whose code did not change, stays completed); `submit` refuses; `--rerun-stale` trains it again
as a new run and leaves the linear cell alone; after a second edit `--accept-stale` keeps the
result and records the choice on the run; undoing that edit returns the study to the code on
disk. `analyze` refuses the stale results meanwhile, as `submit` does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from analysis.tables.arm_costs import MATCHED
from foundation import contract as C
from tests.scaling.conftest import one_size_spec

REPO = Path(__file__).resolve().parents[3]
ENTRY = "ncv.variants:gated_query"

pytestmark = pytest.mark.slow


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}  # not the variant's
    # one table row a line whatever the caller's terminal: `_states` reads the table's rows and
    # a stale note names a path as long as tmp_path's, which a narrow width would break
    env.update(COLUMNS="500", TERM="dumb")
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


def _write_package(src: Path) -> Path:
    """The user's package: the variant in `ncv/variants.py`, its multiply in `ncv/helper.py`."""
    pkg = src / "ncv"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    source = (REPO / "tests" / "variants" / "gated.py").read_text()
    moved = source.replace("return x_local * torch.sigmoid(gate)", "return gated(x_local, gate)")
    moved = moved.replace("from models.catalog.variants import QueryVariant\n",
                          "from models.catalog.variants import QueryVariant\n"
                          "from ncv.helper import gated\n")  # fmt: skip
    assert moved.count("gated(x_local, gate)") == 1 and "from ncv.helper" in moved
    (pkg / "variants.py").write_text(moved)
    helper = pkg / "helper.py"
    helper.write_text("import torch\n\n\ndef gated(x, gate):\n    return x * torch.sigmoid(gate)\n")
    return helper


def _status(path: Path, cwd: Path) -> tuple[dict[str, str], str]:
    out = _ok("status", str(path), cwd=cwd)
    return _states(out), " ".join(out.split())  # rich wraps long notes: one line to search


def test_an_edited_helper_makes_its_cells_stale_until_rerun_or_accepted_and_undo_works(
    tmp_path, data_dir, mlflow_server
):
    """The newcomer's sequence (issue 54). The variant's multiply lives in a helper module of
    the user's package; editing only the helper makes the finished cell stale (`status` names
    `helper.py`), and a submit with more seeds is refused before any seed trains on the new
    helper beside seed 0 on the old one. `--rerun-stale` trains it again; after a comment
    `--accept-stale` keeps it; then the user undoes the comment and adds a seed: the study is
    back at the code on disk (the acceptance dropped), the new seed trains, and the analysis
    sees one code digest per variant, not the undone edit's beside today's; its report states
    how the two arms were matched."""
    from analysis.tables.digests import judged_digests
    from analysis.tables.mlflow_io import load_study_runs

    folder = tmp_path / "mystudy"
    helper = _write_package(folder / "src")
    spec = one_size_spec(data_dir, Path("runs/tiny"), mlflow_server, steps=4)
    spec.update(name="tiny", python_path="src", variants=["linear", ENTRY])
    spec["lr"] = {"law": "none", "grid": {"linear": {"30K": [2e-3]}, "gated": {"30K": [2e-3]}}}
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    _ok("submit", str(path), cwd=elsewhere)
    first, _ = _status(path, elsewhere)
    assert first == {"30K-linear-s0-lr0.002": "completed", "30K-gated-s0-lr0.002": "completed"}
    client = MlflowClient(mlflow_server)
    exp = client.get_experiment_by_name(spec["mlflow"]["experiment"])

    def runs() -> dict[str, object]:
        found = client.search_runs([exp.experiment_id], f"tags.{C.TAG_STUDY} = 'tiny'")
        return {r.data.tags[C.TAG_CELL_ID]: r for r in found if C.TAG_CELL_ID in r.data.tags}

    before = runs()
    assert all(len(r.data.tags[C.TAG_CODE_DIGEST]) == 16 for r in before.values())
    linear, gated = "30K-linear-s0-lr0.002", "30K-gated-s0-lr0.002"
    assert "ncv.helper=" in before[gated].data.tags[C.TAG_CODE_FILES]  # the digest's parts

    # the user's edit, in the helper only: the gate's pre-activation doubled
    source = helper.read_text()
    edited = source.replace("torch.sigmoid(gate)", "torch.sigmoid(2 * gate)")
    assert edited != source
    helper.write_text(edited)
    stale, shown = _status(path, elsewhere)
    assert stale == {linear: "completed", gated: "stale"}
    assert f"model code changed since: {helper}" in shown  # names the changed file

    # more seeds on the edited helper, beside seed 0 on the old one: refused, nothing trained
    path.write_text(yaml.safe_dump({**spec, "seeds": [0, 1]}))
    refused = _cli("submit", str(path), cwd=elsewhere)
    assert refused.returncode == 2, refused.stdout[-2000:] + refused.stderr[-2000:]
    assert gated in refused.stderr and "--rerun-stale" in refused.stderr
    assert "--accept-stale" in refused.stderr and f"changed: {helper}" in refused.stderr
    assert runs().keys() == before.keys()  # nothing trained, nothing deleted
    path.write_text(yaml.safe_dump(spec))
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
    assert rerun[linear].info.run_id == before[linear].info.run_id  # not retrained
    assert rerun[gated].info.run_id != before[gated].info.run_id  # trained again, a new run
    assert rerun[gated].info.status == "FINISHED"
    assert rerun[gated].data.tags[C.TAG_CODE_DIGEST] != before[gated].data.tags[C.TAG_CODE_DIGEST]
    assert client.get_run(before[gated].info.run_id).info.lifecycle_stage == "deleted"
    assert set(_status(path, elsewhere)[0].values()) == {"completed"}

    helper.write_text(edited + "\n# a comment: the numbers cannot change\n")
    assert _status(path, elsewhere)[0][gated] == "stale"
    _ok("submit", str(path), "--accept-stale", cwd=elsewhere)
    accepted = runs()
    assert accepted[gated].info.run_id == rerun[gated].info.run_id  # kept, not retrained
    tags = accepted[gated].data.tags
    assert tags[C.TAG_CODE_ACCEPTED] != tags[C.TAG_CODE_DIGEST]
    assert set(_status(path, elsewhere)[0].values()) == {"completed"}

    # undo: the comment removed, the file on disk is the one the cell trained; and a new seed
    helper.write_text(edited)
    assert set(_status(path, elsewhere)[0].values()) == {"completed"}
    path.write_text(yaml.safe_dump({**spec, "seeds": [0, 1]}))
    out = _ok("submit", str(path), "--rerun-stale", cwd=elsewhere)
    assert "1 accepted cell(s) trained by the code on disk again" in out, out
    undone = runs()
    assert undone[gated].info.run_id == rerun[gated].info.run_id  # not retrained
    assert C.TAG_CODE_ACCEPTED not in undone[gated].data.tags  # the acceptance dropped
    seed1 = "30K-gated-s1-lr0.002"
    assert undone[seed1].data.tags[C.TAG_CODE_DIGEST] == tags[C.TAG_CODE_DIGEST]
    states, _ = _status(path, elsewhere)
    assert len(states) == 4 and set(states.values()) == {"completed"}
    table, _parent = load_study_runs(mlflow_server, spec["mlflow"]["experiment"], "tiny")
    digests = judged_digests(table)  # MixedCode before issue 54: the undone edit's digest
    assert digests["gated"]["digests"] == {tags[C.TAG_CODE_DIGEST]: 2}

    # the report says how the arms were matched (issue 63): per size, each arm's N, FLOPs and
    # time per token, and one line; the gated query holds W_Q's d x d weights and FLOPs
    _ok("analyze", str(path), cwd=elsewhere)
    out = folder / "runs" / "tiny" / "analysis"
    matching = json.loads((out / "verdict.json").read_text())["arm_matching"]
    assert matching["baseline"] == "linear" and list(matching["by_size"]) == ["30K"]
    row = matching["by_size"]["30K"]
    linear_arm, gated_arm = row["arms"]["linear"], row["arms"]["gated"]
    assert gated_arm["num_nonembedding_params"] == linear_arm["num_nonembedding_params"] > 0
    assert gated_arm["flops_per_token"] == linear_arm["flops_per_token"] > 0
    assert row["matched_within_pct"] == 0.0 and row["compared_at_by_variant"] == {"gated": MATCHED}
    assert all(a["num_timed_runs"] == 2 and a["time_per_token_s"] > 0 for a in row["arms"].values())
    report = (out / "report.md").read_text()
    assert "Arms compared" in report
    assert f"30K: FLOPs per token matched within 0% of `linear`'s; compared at {MATCHED}." in report
