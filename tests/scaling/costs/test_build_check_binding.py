"""`build_checks.json` certifies only what was checked (issue 63, finding 11).

A forged file once made `plan` say a miscounted arm was "built and checked ... as declared" and
`run` train it: the file was a bare list of keys. Now each key's record carries the counts the
build was held to, and a record is trusted only if its key is today's and its counts are the
ones the variant declares today; anything else is absent, and the arm is built and checked
again. A directory at the file's name is one line (exit 2), not a traceback after the build.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import models.build_check
from foundation.atomic import UnsafePath
from scaling.costs.build_check import BUILD_CHECKS, VERSION, build_key, certified, check_arms_build
from tests.scaling.conftest import small_spec
from tests.scaling.helpers import REPO, write_and_load

MISCOUNTED = "tests.variants.broken:miscounted"  # declares more parameters than it builds
MISCOUNT = "parameters in all, the built model has"


@pytest.fixture
def study(tmp_path, data_dir):
    spec = small_spec(
        data_dir, tmp_path / "study", f"sqlite:///{tmp_path}/m.db", variants=["linear", MISCOUNTED]
    )
    loaded = write_and_load(spec, tmp_path / "study.yaml")
    loaded.folder.mkdir(parents=True)
    return loaded


def _checked_model(study):
    """The model the build check builds: the arm's smallest."""
    models_ = [c.run.model for c in study.cells if c.variant == "miscounted"]
    return min(models_, key=lambda m: m.num_layers)


def test_a_forged_list_of_keys_does_not_certify_a_miscounted_arm(study):
    """The old format, with today's key: built again, and the miscount stops `plan`."""
    forged = {"passed": [build_key(_checked_model(study))]}
    (study.folder / BUILD_CHECKS).write_text(json.dumps(forged))
    with pytest.raises(ValueError, match=MISCOUNT):
        check_arms_build(study)


def _record_variants(model) -> dict[str, object]:
    """Records that must not be trusted for `model`, each by what is wrong with it."""
    good = certified(model)
    key = build_key(model)
    return {
        "the built counts, not the declared": {key: {**good, "num_params": good["num_params"] - 1}},
        "other FLOPs": {key: {**good, "forward_flops_per_token": 1}},
        "another shape": {key: {**good, "num_layers": 2}},
        "another key": {"0" * 64: good},
        "a bare true": {key: True},
    }


@pytest.mark.parametrize(
    "what",
    ["the built counts, not the declared", "other FLOPs", "another shape", "another key",
     "a bare true"],
)  # fmt: skip
def test_a_record_that_does_not_match_is_checked_again(study, monkeypatch, what):
    model = _checked_model(study)
    passed = _record_variants(model)[what]
    (study.folder / BUILD_CHECKS).write_text(json.dumps({"version": VERSION, "passed": passed}))
    built: list[list[str]] = []

    def stands_in(arms):  # the real check's answer for this arm, without its 15 s build
        built.append([arm for _, arm in arms])
        return [f"variant 'miscounted': it declares 1 {MISCOUNT} 2" for _ in arms]

    monkeypatch.setattr(models.build_check, "build_problems", stands_in)
    with pytest.raises(ValueError, match=MISCOUNT):
        check_arms_build(study, remember=True)
    assert built == [["miscounted"]]


def _builds_nothing(arms):
    assert arms == [], "built again"
    return []


def test_a_true_record_is_trusted_and_written_as_such(study, monkeypatch):
    """A build that passed is remembered with what it was held to, and not built again."""
    monkeypatch.setattr(models.build_check, "build_problems", lambda arms: [None for _ in arms])
    check_arms_build(study, remember=True)
    model = _checked_model(study)
    written = json.loads((study.folder / BUILD_CHECKS).read_text())
    assert written == {"version": VERSION, "passed": {build_key(model): certified(model)}}
    monkeypatch.setattr(models.build_check, "build_problems", _builds_nothing)
    assert "as declared" in check_arms_build(study)[0]


def test_a_directory_named_like_the_cache_is_refused_before_building(study, monkeypatch):
    (study.folder / BUILD_CHECKS).mkdir()
    monkeypatch.setattr(models.build_check, "build_problems", _builds_nothing)
    with pytest.raises(UnsafePath, match="build_checks.json: a directory, not a regular file"):
        check_arms_build(study, remember=True)
    assert (study.folder / BUILD_CHECKS).is_dir()


def test_run_with_a_directory_as_the_cache_is_one_line(study, tmp_path):
    (study.folder / BUILD_CHECKS).mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "scaling", "run", str(tmp_path / "study.yaml")],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO)},  # the variant is tests/variants/broken.py
    )  # fmt: skip
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(errors) == 1 and f"{BUILD_CHECKS}: a directory" in errors[0], proc.stderr
    assert "it" in errors[0] and "remove it" in errors[0]
