"""Test helper for every package: a small, real, prepared stdlib dataset in a few seconds.

    from data_prep.testing import tiny_dataset

    @pytest.fixture(scope="session")
    def data_dir(tmp_path_factory):
        return tiny_dataset(tmp_path_factory.mktemp("data"))

    data = DataConfig(path=str(data_dir), num_val_windows=8)

The dataset is ~2 MB of stdlib source tokenised with a trained byte-level BPE of 2048 tokens
(about 300k train and 30k validation tokens: enough for a few hundred windows of 128). Calling it
again with the same directory reuses the prepared data (in-process and via its manifest).
"""

from __future__ import annotations

from pathlib import Path

from data_prep.config import DataPrepConfig

__all__ = ["tiny_dataset", "TINY_VOCAB_SIZE", "tiny_config"]

TINY_VOCAB_SIZE = 2048
_prepared: dict[Path, Path] = {}


def tiny_config(output_dir: str | Path) -> DataPrepConfig:
    """The settings `tiny_dataset` prepares with (for tests that want to vary one of them)."""
    return DataPrepConfig(
        source="stdlib",
        output_dir=str(Path(output_dir)),
        vocab_size=TINY_VOCAB_SIZE,
        validation_fraction=0.1,
        split_seed=1234,
        max_bytes=2_000_000,
    )


def tiny_dataset(tmp_dir: str | Path) -> Path:
    """Prepare (once per path) a small stdlib dataset under `tmp_dir`; return its directory."""
    out = (Path(tmp_dir) / "tiny_stdlib").resolve()
    if out not in _prepared:
        from data_prep.preparation import prepare  # lazy: datasets and tokenizers

        prepare(tiny_config(out))
        _prepared[out] = out
    return out
