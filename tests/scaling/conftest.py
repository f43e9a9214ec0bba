"""Fixtures for the orchestration tests: a prepared dataset and a small valid study spec."""

from __future__ import annotations

import copy
import uuid
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    from data_prep.testing import tiny_dataset

    return tiny_dataset(tmp_path_factory.mktemp("scaling_data"))


def small_spec(data_dir: Path, out: Path, tracking_uri: str, **overrides) -> dict:
    """A tiny, valid study: 2 explicit sizes (one split over 2 ranks) × 2 arms × 1 seed."""
    spec = {
        "name": "tiny-study",
        "output_dir": str(out),
        "mlflow": {"experiment": f"tests-{uuid.uuid4().hex[:12]}", "tracking_uri": tracking_uri},
        "data": {"path": str(data_dir), "num_val_windows": 4},
        "sizes": ["30K", "60K"],
        "variants": ["linear", "nonlinear"],
        "seeds": [0],
        "model": {"seq_length": 32},
        "ladder": {
            "shapes": {
                "30K": {"num_layers": 1, "hidden_size": 48, "num_attention_heads": 2},
                "60K": {"num_layers": 2, "hidden_size": 48, "num_attention_heads": 2},
            }
        },
        "tokens": {"per_size": {"30K": 3072, "60K": 3072}},
        "batch": {"rule": "fixed", "tokens": 256, "micro_batch_size": 4},
        "schedule": {"warmup_steps": 2},
        "train": {"checkpoint_interval": 4},
        "parallel": {"60K": {"data_parallel": 2}},
        "precision": "fp32",
        "local": {"max_parallel": 2, "timeout_min": 20},
        "slurm": {"time_limit_min": 20, "array_parallelism": 2},
    }
    for key, value in overrides.items():
        spec[key] = copy.deepcopy(value)
    if "ladder" not in overrides:  # a shape for a size the study does not have is an error
        shapes = spec["ladder"]["shapes"]
        spec["ladder"]["shapes"] = {s: shapes[s] for s in spec["sizes"] if s in shapes}
    return spec


# the fewest sizes `scaling run --resolve` takes (the rule judges a trend on 4), tiny shapes
FOUR_SHAPES = {
    "12K": {"num_layers": 1, "hidden_size": 32, "num_attention_heads": 2},
    "25K": {"num_layers": 2, "hidden_size": 32, "num_attention_heads": 2},
    "30K": {"num_layers": 1, "hidden_size": 48, "num_attention_heads": 2},
    "60K": {"num_layers": 2, "hidden_size": 48, "num_attention_heads": 2},
}


def one_size_spec(data_dir: Path, out: Path, tracking_uri: str, steps: int, **overrides) -> dict:
    """`small_spec` cut to its 30K size on one rank, trained for `steps` steps of 256 tokens."""
    one = {"sizes": ["30K"], "parallel": {}, "tokens": {"per_size": {"30K": steps * 256}}}
    return small_spec(data_dir, out, tracking_uri, **(one | overrides))


def lr_search_spec(
    data_dir: Path, out: Path, tracking_uri: str, max_rounds: int = 3, **overrides
) -> dict:
    """`one_size_spec` with the LR search of tests/scaling/e2e/test_refine_e2e.py on one seed:
    linear's grid brackets its optimum, nonlinear's 1.0 diverges."""
    lr = {
        "law": "none",
        "grid": {"linear": {"30K": [1e-3, 1e-2]}, "nonlinear": {"30K": [0.1, 1.0]}},
        "search": {"max_rounds": max_rounds, "scan_seeds": 1, "follow_neighbours": 1},
    }
    return one_size_spec(data_dir, out, tracking_uri, 12, seeds=[0], lr=lr, **overrides)


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory):
    """A real MLflow basic-auth server (tests/scaling/auth_server.py) for one test module."""
    from foundation.process.proc import stop
    from tests.scaling.auth_server import start_auth_server

    server = start_auth_server(tmp_path_factory.mktemp("auth_server"))
    try:
        yield server
    finally:
        stop(server.proc)
