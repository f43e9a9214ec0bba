"""The tiny example studies (examples/*.yaml): each worked site variant plans and runs as a user
would run it, from a copy of examples/ (the variant's module found through `python_path`).

`plan` builds the user's arm once and checks its declared counts (quietly: the build's child
process prints no megatron warnings either). `run` trains both arms at both sizes and judges
them: a verdict with one seed and two sizes is `inconclusive`, which is the word it must say.
The cells are shrunk to 24 steps, as the CI demo is (tests/scaling/helpers.py, ci_demo_spec).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from tests.scaling.helpers import scaling_cli
from tests.test_quiet import _noise

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(p.stem for p in (REPO / "examples").glob("*.yaml"))

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """A user's copy of examples/, shrunk, sharing one prepared corpus."""
    root = tmp_path_factory.mktemp("examples")
    (root / "examples").mkdir()
    shutil.copyfile(REPO / "examples" / "site_examples.py", root / "examples" / "site_examples.py")
    for name in EXAMPLES:
        spec = yaml.safe_load((REPO / "examples" / f"{name}.yaml").read_text())
        spec["data"]["prepare"]["max_bytes"] = 1_500_000
        spec["data"].update(num_val_windows=8, num_select_windows=8)
        spec["model"]["seq_length"] = 32
        spec["tokens"]["per_size"] = {size: 12_288 for size in spec["sizes"]}
        spec["batch"] = {"rule": "fixed", "tokens": 512, "micro_batch_size": 16}  # 24 steps
        spec["schedule"]["warmup_steps"] = 4
        spec["train"] = {"eval_interval": 12, "log_interval": 4}
        (root / "examples" / f"{name}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return root


def test_each_site_example_has_its_tiny_study():
    assert EXAMPLES == ["gqa", "output_gate", "swiglu", "value_residual"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_an_example_study_plans_runs_and_is_judged(root, name, monkeypatch):
    study = root / "examples" / f"{name}.yaml"
    if name == "gqa":  # its point is the smaller KV cache: measured once, on this CPU
        monkeypatch.setenv("SCALING_INFERENCE_COST", "on")
    plan = scaling_cli("plan", "--no-check-environment", str(study), cwd=root)
    assert "4 runs" in plan.stdout, plan.stdout
    assert _noise(plan.stderr) == [], plan.stderr  # the build check's child is quiet too

    out = scaling_cli("run", str(study), cwd=root).stdout
    assert "4/4 done (4 completed" in out, out[-3000:]
    folder = root / "runs" / f"example-{name.replace('_', '-')}"
    verdict = json.loads((folder / "analysis" / "verdict.json").read_text())
    (entry,) = verdict["variants"]
    assert (entry["variant"], entry["baseline"]) == (name, "linear")
    assert entry["verdict"] == "inconclusive"  # one seed, two sizes: no interval, no trend
    assert set(entry["gain_pct_by_size"]) == {"25K", "55K"}  # both sizes trained and judged
    if name == "gqa":  # 1 of 4 key/value heads: its measured KV cache is a quarter of linear's
        ratios = verdict["inference"]["ratios"]["gqa"]
        for size in ("25K", "55K"):
            assert ratios[size]["kv_cache"]["value"] == pytest.approx(0.25)
            assert ratios[size]["memory"]["value"] < 1
        recorded = {  # each cell's run config (its MLflow params too): the arm's own model
            path.parts[-3]: yaml.safe_load(path.read_text())["model"]["num_query_groups"]
            for path in (folder / "cells").glob("*/artifacts/run_config.yaml")
        }
        assert len(recorded) == 4 and all(
            groups == (1 if "gqa" in cell else None) for cell, groups in recorded.items()
        ), recorded
        report = (folder / "analysis" / "report.md").read_text()
        assert re.search(r"^\| gqa \| 55K \|.*\| 0\.25x", report, re.M), report
