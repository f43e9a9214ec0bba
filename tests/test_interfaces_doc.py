"""docs/interfaces.md is the contract between the packages: every project name it cites exists.

A name is a backticked dotted path that starts with one of the project's packages
(`models.build_gpt`, `foundation.contract.TAG_FLOPS_COUNTED`); MLflow tag names and file names
are left out. It is resolved by importing the longest module prefix and reading the rest as
attributes. A renamed or deleted function then fails here, not in a reader's hands.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "interfaces.md"
PACKAGES = ("foundation", "models", "jobs", "data_prep", "scaling", "analysis")
NAME = re.compile(r"`((?:" + "|".join(PACKAGES) + r")(?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


def not_code() -> set[str]:
    """Cited strings that are not Python names: the MLflow tags the contract defines
    (`scaling.role` is the value of `foundation.contract.TAG_ROLE`)."""
    from foundation import contract

    return {v for k, v in vars(contract).items() if k.startswith("TAG_") and isinstance(v, str)}


def cited_names() -> list[str]:
    names = set(NAME.findall(DOC.read_text())) - not_code()
    return sorted(n for n in names if not n.endswith((".json", ".yaml", ".py", ".md")))


def resolve(name: str) -> object:
    """The object `name` denotes: the longest importable module prefix, then attributes."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)  # AttributeError: the doc cites what is not there
        return obj
    raise ModuleNotFoundError(name)


def test_every_name_the_contract_cites_exists():
    names = cited_names()
    assert len(names) > 50, names  # the pattern still finds the doc's names
    missing = []
    for name in names:
        try:
            resolve(name)
        except (ModuleNotFoundError, AttributeError) as err:
            missing.append(f"`{name}` ({err})")
    assert not missing, "docs/interfaces.md cites names that do not exist:\n" + "\n".join(missing)
