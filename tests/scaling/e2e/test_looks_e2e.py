"""`scaling run` end to end, with sequential seeds: the CI copy of the demo (4 sizes x 2 arms,
an LR search, real tiny models, the local executor, a SQLite MLflow store) with
`seeds: {start: 3, max: 5, step: 2}`.

Look 1 reads 3 paired seeds at a nominal level of 1.1% (O'Brien-Fleming-type spending over looks
at 3 and 5 seeds): tiny models' seed noise (a top-size interval tens of % wide) leaves it
undecided, so it adds 2 seeds at each arm's chosen LR where they narrow the interval most per
FLOP; look 2 is the design's last. `scaling run` is killed (its whole process group) right after
look 1 is written; the look judged again from MLflow writes the same file, and the rerun adds
no seed twice and judges no look twice.

Both runs are `scaling run --baseline nonlinear` (the study's `verdict.baseline` is linear): every
look, the report, `status` and the parent run judge `linear` against `nonlinear`, and a third
run with `--baseline linear` is refused, since its report would read another arm than the looks.

The one end-to-end test of `scaling run` from raw text to report on local jobs: prepared data,
the LR search, the looks, MLflow's tree (a parent, one child per cell), the terminal's verdict
lines, verdict.json, the HTML report and plots, the gain at matched GPU-hours from the cells' own
logged step times, and a rerun that trains nothing. (A fixed-seed
copy of the demo drove the same path, the looks aside, and was folded in here.)
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml
from mlflow.tracking import MlflowClient

from foundation import contract as C
from scaling.driver.environment import load_study_spec
from scaling.driver.submission import study_parent_run_id
from scaling.looks.sequential_seeds import judged_against, take_look
from scaling.state.status import study_status
from tests.reliability.helpers import kill_group, start_cli
from tests.scaling.helpers import ci_demo_spec, poll, scaling_cli, study_runs

pytestmark = pytest.mark.slow

DESIGN = {"start": 3, "max": 5, "step": 2}
OVERRIDE = ["--baseline", "nonlinear"]  # the study says linear: judged against nonlinear


def _spec(tmp_path) -> dict:
    spec = ci_demo_spec(tmp_path)
    spec["name"] = "looks-ci"
    spec["seeds"] = DESIGN
    spec["mlflow"] = {"experiment": "looks-ci", "tracking_uri": "sqlite:///mlruns/mlflow.db"}
    spec["lr"]["search"]["max_rounds"] = 4  # every arm's LR bracketed: no design defect
    return spec


def test_two_looks_end_to_end_with_a_kill_between_them(tmp_path, monkeypatch):
    # every `scaling` below writes as on a wide terminal, whatever the caller's: the lines
    # searched for are whole lines, not what a narrow width wraps them into
    monkeypatch.setenv("COLUMNS", "500")
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(_spec(tmp_path)))
    looks_file = tmp_path / "runs" / "looks-ci" / "looks.json"

    run = start_cli(["run", str(path), *OVERRIDE], tmp_path / "run1.log", tmp_path)
    try:
        poll(looks_file.is_file, 900, lambda: (tmp_path / "run1.log").read_text()[-3000:])
    finally:
        kill_group(run)  # between the looks: look 1 written, its seeds maybe started
    written = looks_file.read_text()
    (look1,) = json.loads(written)["looks"]
    assert not look1["stop"] and look1["verdict"] in ("undetected", "helps", "hurts"), look1
    assert look1["baseline"] == "nonlinear" and set(look1["verdicts"]) == {"linear"}
    assert look1["num_paired_top"] == 3 and look1["level"] == pytest.approx(0.0114, abs=1e-4)
    top = "100K"
    assert look1["add_seeds"].get(top) == 2  # the information is counted at the top size
    added = {(a["variant"], a["size"]): a for a in look1["added"]}
    assert {v for v, s in added if s == top} == {"linear", "nonlinear"}
    assert all(a["seeds"] == [3, 4] for a in added.values())

    # a pure function of the finished runs: judged again from MLflow, the same decision
    looks_file.unlink()
    before = judged_against(load_study_spec(path), "nonlinear")  # without the look's seeds
    assert {c.seed for c in before.cells} == {0, 1, 2}
    take_look(before, study_status(before), say=lambda _m: None)
    assert looks_file.read_text() == written

    out = scaling_cli("run", str(path), *OVERRIDE, cwd=tmp_path).stdout
    # look 1 is not judged again: its seeds run, then look 2 (`look N: WORD; more seeds`)
    assert not re.search(r"look 1: [^\n]*; (more seeds|stop)", out), out
    data = json.loads(looks_file.read_text())
    assert data["design"]["start"] == 3 and data["design"]["max"] == 5
    assert [k["look"] for k in data["looks"]] == [1, 2]
    assert data["looks"][0] == look1
    last = data["looks"][-1]
    assert last["stop"] and last["num_paired_top"] == 5 and last["added"] == []
    assert last["level"] == pytest.approx(0.0457, abs=1e-4)
    assert f"look 2: {last['verdict']}; stop" in out

    # each cell once in MLflow, the look's seeds tagged with the round that added them
    study = load_study_spec(path)
    children = [r for r in study_runs(study) if r.data.tags.get(C.TAG_ROLE) != C.ROLE_STUDY]
    ids = sorted(r.data.tags[C.TAG_CELL_ID] for r in children)
    assert ids == sorted(c.cell_id for c in study.cells)
    added_by_looks = [c for c in study.cells if c.round >= look1["round"]]  # after the search
    seeded = {(c.variant, c.size, round(c.lr, 9), c.seed) for c in added_by_looks}
    asked = {
        (a["variant"], a["size"], round(a["lr"], 9), s) for a in look1["added"] for s in a["seeds"]
    }
    assert seeded == asked
    assert all(c.seed in (3, 4) for c in study.cells if c.round == look1["round"])

    # the parent run: the looks as steps, the latest verdict as a tag, FINISHED at the end
    client = MlflowClient(study.mlflow.tracking_uri)
    parent = client.get_run(study_parent_run_id(study))
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["look/verdict"] == last["verdict"]
    levels = client.get_metric_history(parent.info.run_id, "look/level")
    assert {m.step for m in levels} == {1, 2}  # look 1 twice if the kill came after its log
    assert {m.step: round(m.value, 4) for m in levels} == {1: 0.0114, 2: 0.0457}
    gains = client.get_metric_history(parent.info.run_id, "look/linear/top_gain_pct/lo")
    assert {m.step for m in gains} == {1, 2}

    status = scaling_cli("status", str(path), cwd=tmp_path).stdout
    assert f"look 2 of at most 2: {last['verdict']} (level 0.0457); stopped" in status, status

    verdict = json.loads((tmp_path / "runs" / "looks-ci" / "analysis" / "verdict.json").read_text())
    (entry,) = verdict["variants"]
    assert (entry["variant"], entry["baseline"]) == ("linear", "nonlinear")  # as the looks were
    assert entry["verdict"] == last["verdicts"]["linear"]  # judged at the last look's level
    assert [k["look"] for k in verdict["sequential"]["looks"]] == [1, 2]
    report = (tmp_path / "runs" / "looks-ci" / "analysis" / "report.md").read_text()
    assert "Sequential looks" in report
    _check_time_matched(verdict, children, client, report, out)
    num_cells = len(study.cells)
    assert f"{num_cells}/{num_cells} done ({num_cells} completed" in out, out[-3000:]
    assert "linear vs nonlinear:" in out and "report:" in out and "MLflow UI:" in out
    assert entry["reason"] and len(entry["gain_pct_by_size"]) == 4
    # the terminal prints the same verdict lines as `scaling analyze`: rounded, no None
    from analysis.report.terminal import verdict_lines

    for line in verdict_lines(verdict):
        assert line in out, (line, out[-3000:])
    assert not any("None" in line or "not available" in line for line in verdict_lines(verdict))
    analysis = tmp_path / "runs" / "looks-ci" / "analysis"
    html = (analysis / "report.html").read_text()
    if entry["verdict"] == "undetected":  # the headline says so, with what it can detect
        assert "not resolved" in html and "detects gains of" in html
    assert "<img" in html and "nonlinear" in html and "seed sd" in html
    assert list(analysis.glob("*.png")) and list(analysis.glob("*.svg"))
    assert {r.info.status for r in children} == {"FINISHED"}
    assert {r.data.tags.get("mlflow.parentRunId") for r in children} == {parent.info.run_id}
    assert all("final_select_loss" in r.data.metrics for r in children)
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id, "analysis")}
    assert "analysis/verdict.json" in artifacts and "analysis/report.html" in artifacts

    # re-running finds every cell done: nothing is trained again, no run is added
    again = scaling_cli("run", str(path), *OVERRIDE, "--no-analyze", cwd=tmp_path, timeout=300)
    assert f"{num_cells} cells, {num_cells} already done" in again.stdout, again.stdout[-2000:]
    assert len(study_runs(study)) == num_cells + 1

    # the looks read nonlinear: a run that would report against linear is refused, nothing run
    args = [sys.executable, "-m", "scaling", "run", str(path), "--baseline", "linear"]
    refused = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    said = " ".join(refused.stderr.replace("\u2502", " ").split())  # unwrap typer's box
    assert "look(s) 1, 2 of this study were judged against nonlinear" in said, said


def _check_time_matched(verdict: dict, children: list, client, report: str, out: str) -> None:
    """The gain at matched GPU-hours rests on these cells' own logged step times: each arm's
    ratio at the top size is the one recomputed here from MLflow's `tokens_per_s` histories
    (median per run, geometric mean per arm), on the device the runs recorded."""
    import numpy as np

    timed = verdict["time_matched"]
    assert timed["measured"] and timed["source"].startswith("cell step times"), timed
    assert timed["device"] == children[0].data.tags["device"]  # as the runs recorded it
    (row,) = timed["variants"]
    top = row["top"]
    assert top["size"] == "100K" and set(row["by_size"]) == {"12K", "25K", "55K", "100K"}

    def per_run(variant: str) -> list[float]:
        runs = [r for r in children if r.data.tags[C.TAG_VARIANT] == variant]
        runs = [r for r in runs if r.data.tags[C.TAG_SIZE] == top["size"]]
        got = []
        for r in runs:
            history = client.get_metric_history(r.info.run_id, "tokens_per_s")
            got.append(float(np.median([1.0 / m.value for m in history])))
        return got

    lin, non = per_run("linear"), per_run("nonlinear")
    assert top["time_ratio"]["num_runs"] == {"variant": len(lin), "baseline": len(non)}
    ratio = float(np.exp(np.mean(np.log(lin)) - np.mean(np.log(non))))
    assert top["time_ratio"]["value"] == pytest.approx(ratio, rel=1e-9)
    low, high = top["time_ratio"]["ci95"]
    assert low < ratio < high  # the runs' spread, carried
    assert top["stated"] and top["gain_pct"]["ci95"] is not None
    print(
        f"\ntime per token linear/nonlinear at 100K: {ratio:.3f} [{low:.3f}, {high:.3f}] "
        f"({len(lin)}/{len(non)} runs, {timed['device']}); gain at matched FLOPs "
        f"{top['flop_gain_pct']}, at matched GPU-hours {top['gain_pct']}"
    )
    assert "Gain at matched GPU-hours" in report
    assert "linear at matched GPU-hours: gain at 100K" in out  # the terminal's line
