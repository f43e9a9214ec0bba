"""The build check is paid once per (variant code, model config, torch and megatron versions):
`run` and `submit` record the builds that passed in the study folder (`build_checks.json`), and
the next command of the same study does not build the same model again, but says the same
line; an edit to the variant's code is a new key (built and checked again)."""

from __future__ import annotations

import json

import models.build_check
from scaling.costs.build_check import BUILD_CHECKS, build_key, check_arms_build
from tests.scaling.conftest import small_spec
from tests.scaling.helpers import gated_package, write_and_load


def test_a_passed_build_is_not_built_again_until_its_code_changes(tmp_path, data_dir, monkeypatch):
    variant = gated_package(tmp_path, "bcv")  # the user's own package, beside the study
    spec = small_spec(
        data_dir, tmp_path / "study", f"sqlite:///{tmp_path}/m.db",
        python_path="src", variants=["linear", "bcv.variants:gated_query"],
    )  # fmt: skip
    study = write_and_load(spec, tmp_path / "study.yaml")
    study.folder.mkdir(parents=True)  # as `run` and `submit` make it before the check

    built: list[int] = []  # the real check, counted: how many models each call builds
    real = models.build_check.build_problems

    def counted(arms):
        built.append(len(arms))
        return real(arms)

    monkeypatch.setattr(models.build_check, "build_problems", counted)

    first = check_arms_build(study, remember=True)
    assert built == [1] and "built and checked (1 layers, d=48)" in first[0], first
    keys = json.loads((study.folder / BUILD_CHECKS).read_text())["passed"]
    models_ = [c.run.model for c in study.cells if c.variant == "gated"]
    model = min(models_, key=lambda m: m.num_layers)  # the smallest size is the one checked
    assert list(keys) == [build_key(model)]

    assert check_arms_build(study) == first  # the same line, nothing built
    assert built == [1, 0]

    # an edit to the variant's file (a comment is code too) is another key: built again
    variant.write_text(variant.read_text() + "\n# edited\n")
    assert build_key(model) not in keys
