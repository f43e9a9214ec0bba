"""Engines are chosen through one registry (`jobs.engine_specs`): its names are the only ones a
run config or a study accepts, each builder names a class that exists, and `build_engine` has no
branch on an engine's name. Nothing is imported beyond the configs (the engines stay unloaded)."""

from __future__ import annotations

import ast
import importlib.util
import inspect
from pathlib import Path
from typing import get_args, get_type_hints

import pytest

from jobs.config import RunConfig
from jobs.engine_specs import ENGINE_NAMES, ENGINE_SPECS, engine_spec
from jobs.engines import engine
from scaling.spec.study import StudySpec


def test_the_configs_accept_the_registered_names_only():
    assert ENGINE_NAMES == ("megatron", "deepspeed")
    assert get_args(get_type_hints(RunConfig)["engine"]) == ENGINE_NAMES
    assert get_args(get_type_hints(StudySpec)["engine"]) == ENGINE_NAMES
    with pytest.raises(ValueError, match="'fairscale' is not one of megatron, deepspeed"):
        engine_spec("fairscale")


@pytest.mark.parametrize("name", ENGINE_NAMES)
def test_each_builder_names_a_class_of_its_module(name: str):
    module, cls = ENGINE_SPECS[name].builder
    found = importlib.util.find_spec(module)
    assert found is not None and found.origin, f"{name}: no module {module}"
    tree = ast.parse(Path(found.origin).read_text())
    assert cls in {n.name for n in tree.body if isinstance(n, ast.ClassDef)}, f"{module}.{cls}"


def test_build_engine_does_not_branch_on_a_name():
    tree = ast.parse(inspect.getsource(engine.build_engine))
    named = [
        n.lineno for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in ENGINE_NAMES
    ]
    assert named == [], f"build_engine names an engine at lines {named}"
