"""`tiny_run_config`: a real, seconds-long run config for tests in any package.

    cfg = tiny_run_config(tmp_path, data_dir=data_dir, train={"steps": 4}, engine="deepspeed")

Overrides are merged into the nested config dict (a dict value updates that sub-config), then
the whole thing goes through `from_dict`, so overrides are validated like a user's file.

`PauseFiles(folder, step)`: the environment that holds runs after `step` (jobs/loop/pause.py) and
the files a fault test waits on and creates to release each run by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data_prep.testing import TINY_VOCAB_SIZE, tiny_dataset
from foundation.config import from_dict
from jobs.config import RunConfig
from jobs.loop.pause import ENV_FILE, ENV_STEP, PausePoint

__all__ = ["PauseFiles", "tiny_run_config", "tiny_run_dict"]


def _merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def tiny_run_dict(
    tmp_path: str | Path, data_dir: str | Path | None = None, **overrides: Any
) -> dict[str, Any]:
    """The plain-dict form of `tiny_run_config` (for writing run-config files in tests)."""
    tmp_path = Path(tmp_path)
    if data_dir is None:
        data_dir = tiny_dataset(tmp_path / "data")

    base = {
        "name": "tiny",
        "study": "tests",
        "seed": 1,
        "output_dir": str(tmp_path / "run"),
        # 2 layers, d 64, 4 heads, seq 32: a few ms per micro-batch on one CPU thread
        "model": {
            "vocab_size": TINY_VOCAB_SIZE,
            "seq_length": 32,
            "num_layers": 2,
            "hidden_size": 64,
            "num_attention_heads": 4,
            "query_variant": "nonlinear",
        },
        "data": {"path": str(data_dir), "seed": 1234, "num_val_windows": 8, "val_seed": 0},
        # 8 sequences x 32 tokens = 256 tokens per step; micro-batch 2 -> 4 micro-batches (DP 1)
        "train": {"steps": 6, "global_batch_tokens": 256, "micro_batch_size": 2},
        "optimizer": {"lr": 3e-3},
        "schedule": {"kind": "cosine", "warmup_steps": 2},
        "tracking": {"enabled": False, "experiment": "tests", "flush_interval_s": 0.5},
    }
    return _merge(base, overrides)


def tiny_run_config(
    tmp_path: str | Path, data_dir: str | Path | None = None, **overrides: Any
) -> RunConfig:
    """A validated tiny `RunConfig` writing under `tmp_path/run` (tracking off unless asked)."""
    return from_dict(RunConfig, tiny_run_dict(tmp_path, data_dir, **overrides), where="run")


@dataclass(frozen=True)
class PauseFiles:
    """Runs started with `env()` hold after `step`; each run's files are named for the run."""

    folder: Path
    step: int

    def env(self) -> dict[str, str]:
        return {ENV_STEP: str(self.step), ENV_FILE: str(Path(self.folder) / "{name}")}

    def point(self, run_name: str) -> PausePoint:
        return PausePoint(self.step, Path(self.folder) / run_name)

    def reached(self, run_name: str) -> bool:
        """True once `run_name` has begun holding (its `.reached` file is written)."""
        return self.point(run_name).reached.exists()

    def release(self, run_name: str) -> None:
        Path(self.folder).mkdir(parents=True, exist_ok=True)
        self.point(run_name).release.touch()

    def released(self, run_name: str) -> bool:
        return self.point(run_name).release.exists()

    def release_all(self) -> None:
        """Release every run that has held here (a failing test's clean-up)."""
        for reached in Path(self.folder).glob("*.reached"):
            self.release(reached.name.removesuffix(".reached"))
