"""The data layer: prepare a corpus once, then every run reads the same tokens in the same order.

Public API (imported lazily so that `scaling --help` does not load torch or megatron):
`DataPrepConfig`, `prepare(config, force=False)` → `Manifest`, `load_manifest(path)`,
`DataConfig`, `training_dataset(data, seq_length, num_samples)`,
`validation_windows(data, seq_length, which="loss"|"select")`.
`data_prep.testing.tiny_dataset(dir)` prepares a small stdlib dataset for tests.
"""

from __future__ import annotations

import importlib
from typing import Any

from foundation.process.megatron_jit import defer_megatron_compile

defer_megatron_compile()  # before any megatron import: its fused kernels compile on first use

_EXPORTS = {
    "DataPrepConfig": "data_prep.config",
    "DataConfig": "data_prep.config",
    "Manifest": "data_prep.manifest",
    "load_manifest": "data_prep.manifest",
    "prepare": "data_prep.preparation",
    "TrainingDataset": "data_prep.access",
    "training_dataset": "data_prep.access",
    "validation_windows": "data_prep.access",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'data_prep' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
