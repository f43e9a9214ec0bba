"""Fixtures for the jobs tests: one tiny prepared dataset per session."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    from data_prep.testing import tiny_dataset

    return tiny_dataset(tmp_path_factory.mktemp("jobs_data"))
