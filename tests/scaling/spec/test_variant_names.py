"""A user's variant by name: import failures reported as themselves, one list of valid names
with a near miss, and LR grid keys by the arm's name exactly as docs/variants.md shows them."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
import yaml

from foundation.config import ConfigError
from scaling.driver.environment import load_study_spec
from scaling.spec.grid import learning_rates
from scaling.spec.ladder import ARMS
from tests.scaling.conftest import one_size_spec

REPO = Path(__file__).resolve().parents[3]
GATED = "tests.variants.gated:gated_query"


@pytest.fixture
def import_path(monkeypatch):
    """Restore sys.path and PYTHONPATH after a study adds its folders."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))


def _study(tmp_path: Path, data_dir: Path, **overrides) -> Path:
    spec = one_size_spec(data_dir, tmp_path / "out", f"sqlite:///{tmp_path / 'm.db'}", steps=4)
    spec.update(overrides)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _problems(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as err:
        load_study_spec(path, check_environment=False)
    return err.value.problems


def test_an_import_failure_is_reported_as_the_import_error(tmp_path, data_dir, import_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "broken_variant.py").write_text("import math\n\nscale = math.sqrt(undefined_name)\n")
    path = _study(tmp_path, data_dir, python_path="src", variants=["linear", "broken_variant:make"])
    (problem,) = _problems(path)
    assert "study.variants[1]: query variant 'broken_variant:make'" in problem
    assert f"importing module 'broken_variant' ({src / 'broken_variant.py'}) failed" in problem
    assert "NameError: name 'undefined_name' is not defined" in problem  # the traceback's last line
    assert f"at {src / 'broken_variant.py'}:3" in problem
    assert "unknown" not in problem

    # without python_path the module is not found: the error says so and names the fix
    path = _study(tmp_path, data_dir, variants=["linear", "elsewhere_variant:make"])
    (problem,) = _problems(path)
    assert "cannot import module 'elsewhere_variant'" in problem
    assert "ModuleNotFoundError: No module named 'elsewhere_variant'" in problem
    assert "python_path" in problem


def test_an_unknown_name_gets_one_list_of_valid_names_and_a_near_miss(tmp_path, data_dir):
    path = _study(tmp_path, data_dir, variants=["linaer", "nonlinear"])
    (problem,) = _problems(path)
    assert problem.count("did you mean 'linear'?") == 1
    listed = re.search(r"valid: (.*?), or a query variant", problem).group(1).split(", ")
    assert listed == list(ARMS)  # every arm a study accepts, once
    assert problem.count("valid:") == 1 and problem.count("identity") == 1


def _docs_grid_example() -> dict:
    """The `variants:` + `lr:` YAML example of docs/variants.md, section 3."""
    text = (REPO / "docs" / "variants.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    example = next(yaml.safe_load(b) for b in blocks if "grid" in b)
    assert "arm's name" in text and re.search(r"grid keys may use the arm's name", text)
    return example


def test_lr_grid_keys_accept_the_arm_name_as_the_docs_say(tmp_path, data_dir, import_path):
    example = _docs_grid_example()
    (entry,) = [v for v in example["variants"] if ":" in v]
    (key,) = example["lr"]["grid"]
    (size,) = example["lr"]["grid"][key]
    assert key == "gated" and key != entry  # keyed by the arm's name, not the entry
    variants = [GATED if v == entry else v for v in example["variants"]]
    path = _study(
        tmp_path,
        data_dir,
        sizes=[size],
        ladder={},
        tokens={"per_size": {size: 4096}},
        variants=variants,
        lr=example["lr"],
    )
    study = load_study_spec(path, check_environment=False)
    lrs = {c.variant: set() for c in study.cells}
    for cell in study.cells:
        lrs[cell.variant].add(cell.lr)
    documented = [float(lr) for lr in example["lr"]["grid"]["gated"][size]]  # YAML: "1e-3"
    assert lrs["gated"] == set(documented)
    assert learning_rates(study.spec, GATED, size) == documented
    assert len(lrs["linear"]) == 1  # the law's LR: the grid named only the user's arm

    # the arm's name and the entry as written both keyed: ambiguous, refused
    both = {**example["lr"]["grid"], GATED: example["lr"]["grid"]["gated"]}
    path = _study(
        tmp_path,
        data_dir,
        sizes=[size],
        ladder={},
        tokens={"per_size": {size: 4096}},
        variants=variants,
        lr={"grid": both},
    )
    (problem,) = _problems(path)
    assert problem.endswith(f"study.lr.grid.gated: the arm of {GATED!r}, which has its own grid "
                            "entry too; keep one of them")  # fmt: skip


def test_the_code_digest_follows_the_variants_module_and_the_model_code(tmp_path, import_path):
    from foundation.provenance import source_digest
    from models.catalog.variants import code_digest, variant_module
    from scaling.state.run_cache import CellRun

    module = tmp_path / "digest_variant.py"
    module.write_text("RANK = 2\n")
    sys.path.insert(0, str(tmp_path))
    name = "digest_variant:make"
    assert variant_module(name) == "digest_variant" and variant_module("linear") is None
    assert code_digest("linear") == code_digest("nonlinear") == source_digest(["models"])
    before = code_digest(name)
    assert before != code_digest("linear") and code_digest(name) == before  # deterministic
    module.write_text("RANK = 4\n")
    after = code_digest(name)
    assert after != before and code_digest("linear") == source_digest(["models"])

    def run(**tags) -> CellRun:
        return CellRun("r", "FINISHED", "completed", 1.0, 1.0, 0, None, **tags)

    assert run(code_digest=before).stale(after)
    assert not run(code_digest=after).stale(after)
    assert not run(code_digest=before, code_accepted=after).stale(after)  # --accept-stale
    assert not run().stale(after)  # recorded before digests existed: fresh


def test_the_code_digest_follows_the_users_modules_the_variant_imports(tmp_path, import_path):
    """A helper module of the user's package, imported by the variant (at the top, inside a
    function, relatively), is part of the digest and named by what changed; an installed
    package (torch) and this project's packages are not followed (issue 54)."""
    from models.catalog.code_parts import changed_code, digest_of_parts, format_parts
    from models.catalog.variants import code_parts

    pkg = tmp_path / "helper_pkg"
    (pkg / "deep").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "deep" / "__init__.py").write_text("")
    (pkg / "helper.py").write_text("import torch\nfrom .deep import far\n\nSCALE = 1.0\n")
    (pkg / "deep" / "far.py").write_text("import json\nfrom models import init\nK = 1\n")
    (pkg / "unused.py").write_text("X = 1\n")
    (pkg / "variant.py").write_text(
        "from helper_pkg import helper\n\n\ndef make():\n"
        "    from helper_pkg.deep import far  # noqa: F401\n    return None\n"
    )
    sys.path.insert(0, str(tmp_path))
    name = "helper_pkg.variant:make"
    parts = code_parts(name)
    assert set(parts) == {
        "models",
        "helper_pkg",
        "helper_pkg.variant",
        "helper_pkg.helper",
        "helper_pkg.deep",
        "helper_pkg.deep.far",
    }
    recorded = format_parts(parts)
    (pkg / "deep" / "far.py").write_text("import json\nfrom models import init\nK = 2\n")
    (pkg / "unused.py").write_text("X = 2\n")  # imported by nothing: not the model's code
    today = code_parts(name)
    assert digest_of_parts(today) != digest_of_parts(parts)
    assert changed_code(recorded, today) == [str(pkg / "deep" / "far.py")]
    assert changed_code(None, today) == []  # a run from before the parts were recorded
