"""docs/studies.md lists every key of the study schema, and nothing that is not one."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import get_type_hints

from foundation.config import field_docs
from scaling.spec.study import StudySpec

DOC = Path(__file__).resolve().parents[3] / "docs" / "studies.md"


def _spec_table() -> dict[str, str]:
    """key cell → whole row, from the table under "## The spec"."""
    text = DOC.read_text().split("## The spec", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 2 and not set(cells[0]) <= {"-", " "}:
            rows[cells[0]] = line
    return rows


def test_every_study_key_is_documented_and_every_documented_key_exists():
    rows = _spec_table()
    documented = {m for key in rows for m in re.findall(r"`([a-z_]+)[.`]", key)}
    fields = {name for name, _, _ in field_docs(StudySpec)}
    assert fields - documented == set(), "keys missing from docs/studies.md"
    assert documented - fields == set(), "docs/studies.md lists keys the schema lacks"
    for name, section in get_type_hints(StudySpec).items():
        if not dataclasses.is_dataclass(section):
            continue
        row = " ".join(line for key, line in rows.items() if f"`{name}" in key)
        for sub, _, _ in field_docs(section):
            assert f"`{sub}`" in row or f".{sub}`" in row, f"{name}.{sub} is not in its row"
