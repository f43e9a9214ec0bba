"""A tiny stdlib dataset prepared once per test session, shared by the data_prep tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from data_prep.testing import tiny_dataset


@pytest.fixture(scope="session")
def tiny(tmp_path_factory) -> Path:
    return tiny_dataset(tmp_path_factory.mktemp("data_prep"))
