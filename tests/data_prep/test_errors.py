"""Every bad input gets a ValueError naming the thing and the fix, before output is written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from data_prep import DataConfig, DataPrepConfig, load_manifest, prepare
from data_prep.testing import tiny_config
from foundation.config import ConfigError, from_dict

REPO = Path(__file__).resolve().parents[2]


def _listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} if folder.exists() else set()


def _fails(config: DataPrepConfig, pattern: str) -> None:
    """Refused naming the field; nothing left beside the output either (its `.NAME.lock`)."""
    parent = Path(config.output_dir).parent
    before = _listing(parent)
    with pytest.raises(ValueError, match=pattern):
        prepare(config)
    assert not Path(config.output_dir).exists(), "bad input must not leave output behind"
    assert _listing(parent) == before, _listing(parent) - before


def test_a_refusal_under_a_new_folder_leaves_no_folder_or_lock(tmp_path):
    """Issue 55, item 17: a refusal left `.o.lock` and the folders made for the output."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.txt").write_text("")
    out = tmp_path / "new" / "deeper" / "o"
    config = DataPrepConfig(source=str(tmp_path / "src"), output_dir=str(out))
    with pytest.raises(ValueError, match="no non-empty documents"):
        prepare(config)
    assert _listing(tmp_path) == {"src", "src/a.txt"}


def test_cli_refusal_is_one_error_line_and_leaves_nothing(tmp_path):
    """Issue 55, item 17: `prepare-data` refusals began `prepare-data:`, not `error:`."""
    import typer
    from typer.testing import CliRunner

    from data_prep.cli import prepare_data

    app = typer.Typer()
    app.command("prepare-data")(prepare_data)
    app.command("unused")(lambda: None)  # two commands, so `prepare-data` is addressed by name
    out = tmp_path / "new" / "o"
    args = ["prepare-data", "--source", str(tmp_path / "absent.jsonl"), "--output", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    (line,) = [x for x in result.output.splitlines() if x.startswith("error:")]
    assert "absent.jsonl does not exist" in line and "check the path" in line, line
    assert _listing(tmp_path) == set()


def test_missing_file(tmp_path):
    config = DataPrepConfig(source=str(tmp_path / "absent.jsonl"), output_dir=str(tmp_path / "o"))
    _fails(config, r"absent.jsonl does not exist .*check the path")


def test_empty_corpus(tmp_path):
    (tmp_path / "src").mkdir()
    for name in ("a.txt", "b.txt"):
        (tmp_path / "src" / name).write_text("")
    config = DataPrepConfig(source=str(tmp_path / "src"), output_dir=str(tmp_path / "o"))
    _fails(config, "no non-empty documents")


def test_text_field_absent_lists_the_fields(tmp_path):
    rows = [{"content": "def f():\n    return 1\n", "lang": "py"}] * 3
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = DataPrepConfig(source=str(tmp_path / "d.jsonl"), output_dir=str(tmp_path / "o"))
    _fails(config, r"data_prep.text_field: .* no field 'text'; its fields are content, lang")


def test_malformed_jsonl_and_non_text_field(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"text": "fine"}\n{"text": oops\n')
    config = DataPrepConfig(source=str(tmp_path / "bad.jsonl"), output_dir=str(tmp_path / "o"))
    _fails(config, r"could not parse .*bad.jsonl as json")
    (tmp_path / "num.jsonl").write_text('{"text": 1}\n{"text": 2}\n')
    config = DataPrepConfig(source=str(tmp_path / "num.jsonl"), output_dir=str(tmp_path / "o"))
    _fails(config, "a document is a int, not text")


def test_unsupported_file_type(tmp_path):
    (tmp_path / "notes.md").write_text("# hi")
    config = DataPrepConfig(source=str(tmp_path / "notes.md"), output_dir=str(tmp_path / "o"))
    _fails(config, r"of type \['.md'\]; expected one of")


def test_vocab_the_dtype_cannot_hold(tmp_path):
    with pytest.raises(ConfigError, match="data_prep.dtype: uint16 cannot hold a vocab of 70000"):
        from_dict(DataPrepConfig, {"vocab_size": 70_000, "dtype": "uint16"}, "data_prep")
    vocab = {f"w{i}": i for i in range(70_000)} | {"<|endoftext|>": 70_000}
    big = Tokenizer(models.WordLevel(vocab, unk_token="w0"))
    big.pre_tokenizer = pre_tokenizers.Whitespace()
    big.save(str(tmp_path / "big.json"))
    config = tiny_config(tmp_path / "o")
    config.tokenizer, config.dtype = str(tmp_path / "big.json"), "uint16"
    _fails(config, r"uint16 cannot hold the 70001-token vocab .*use dtype int32 or auto")


def test_tokenizer_without_eod(tmp_path):
    plain = Tokenizer(models.WordLevel({"a": 0, "b": 1}, unk_token="a"))
    plain.save(str(tmp_path / "plain.json"))
    config = tiny_config(tmp_path / "o")
    config.tokenizer = str(tmp_path / "plain.json")
    _fails(config, "data_prep.eod_token: the tokenizer has none of <|endoftext|>")


@pytest.mark.parametrize(
    "data, fragment",
    [
        ({"validation_fraction": 1.5}, "data_prep.validation_fraction: 1.5 must be in (0, 1)"),
        ({"vocab_size": 100}, "data_prep.vocab_size: 100 cannot hold the 256 byte symbols"),
        ({"source": "hf:"}, "lacks a dataset name"),
        ({"num_proc": 0}, "data_prep.num_proc: 0 must be >= 1"),
    ],
)
def test_config_errors_name_the_field(data, fragment):
    with pytest.raises(ConfigError) as err:
        from_dict(DataPrepConfig, data, "data_prep")
    assert fragment in str(err.value)


def test_data_config_errors():
    with pytest.raises(ConfigError, match="data.num_val_windows: 0 must be >= 1"):
        from_dict(DataConfig, {"num_val_windows": 0}, "data")


def _broken_copy(tiny: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(tiny, copy, ignore=shutil.ignore_patterns("cache"))
    load_manifest(copy, verify_hashes=True)  # intact before we break it
    return copy


def test_truncated_bin(tiny, tmp_path):
    copy = _broken_copy(tiny, tmp_path)
    with open(copy / "train.bin", "r+b") as f:
        f.truncate((copy / "train.bin").stat().st_size - 10)
    with pytest.raises(ValueError, match=r"train.bin: \d+ bytes but its index needs \d+"):
        load_manifest(copy)


def test_truncated_idx(tiny, tmp_path):
    copy = _broken_copy(tiny, tmp_path)
    with open(copy / "valid.idx", "r+b") as f:
        f.truncate(100)
    with pytest.raises(ValueError, match="valid.idx: 100 bytes but its header promises"):
        load_manifest(copy)
    (copy / "valid.idx").write_bytes(b"garbage" * 10)
    with pytest.raises(ValueError, match="valid.idx: not a megatron index"):
        load_manifest(copy)


def test_mismatched_bin_and_idx(tiny, tmp_path):
    copy = _broken_copy(tiny, tmp_path)
    shutil.copy(copy / "valid.idx", copy / "train.idx")
    with pytest.raises(ValueError, match="train.idx: .* manifest says .*mismatched files"):
        load_manifest(copy)
    with pytest.raises(ValueError, match="mismatched"):
        from data_prep import training_dataset

        training_dataset(DataConfig(path=str(copy)), 16, 4)


def test_same_size_corruption_is_caught_by_hashes(tiny, tmp_path):
    copy = _broken_copy(tiny, tmp_path)
    with open(copy / "train.bin", "r+b") as f:
        f.write(b"\x01\x02")
    load_manifest(copy)  # sizes still agree
    with pytest.raises(ValueError, match="train.bin: content hash differs"):
        load_manifest(copy, verify_hashes=True)


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "scaling", "prepare-data", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
        timeout=300,
    )


def test_cli_offline_hub_errors(tmp_path):
    """Real Hugging Face clients in offline mode: the tokenizer and the dataset are not cached."""
    offline = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    out = str(tmp_path / "o")
    proc = _cli("--tokenizer", "gpt2", "--output", out, "--max-bytes", "1000", env=offline)
    assert proc.returncode == 2
    assert "'gpt2' is not in the Hugging Face cache and HF_HUB_OFFLINE is set" in proc.stderr
    assert "local tokenizer.json" in proc.stderr
    proc = _cli("--source", "hf:openwebtext", "--output", out, env=offline)
    assert proc.returncode == 2
    assert "could not load 'hf:openwebtext'" in proc.stderr and "HF_HUB_OFFLINE" in proc.stderr
    assert not Path(out).exists()


def test_cli_prepares_and_reuses(tmp_path):
    out = tmp_path / "o"
    args = ["--output", str(out), "--max-bytes", "200000", "--vocab-size", "512"]
    args += ["--validation-fraction", "0.3"]
    proc = _cli(*args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"{out}: vocab 512 (uint16)" in proc.stdout
    assert load_manifest(out)["config"]["max_bytes"] == 200_000
    proc = _cli(*args[:-1], "0.5")
    assert proc.returncode == 2 and "different settings (validation_fraction)" in proc.stderr
