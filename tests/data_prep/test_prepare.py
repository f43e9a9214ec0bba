"""prepare(): round trip, determinism across processes, reuse/--force, crash safety, sources."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from megatron.core.datasets.indexed_dataset import IndexedDataset
from tokenizers import Tokenizer

from data_prep import DataPrepConfig, load_manifest, preparation, prepare
from data_prep.preparation import is_validation_document
from data_prep.sources import open_source, stdlib_files
from data_prep.testing import tiny_config

REPO = Path(__file__).resolve().parents[2]


def _decoded_documents(path: Path, split: str) -> list[str]:
    """Every document of a split, decoded, with its trailing EOD checked and dropped."""
    manifest = load_manifest(path)
    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    dataset = IndexedDataset(str(path / split))
    texts = []
    for i in range(len(dataset)):
        ids = dataset.get(i).tolist()
        assert ids[-1] == manifest.eod_token_id and manifest.eod_token_id not in ids[:-1]
        texts.append(tokenizer.decode(ids[:-1], skip_special_tokens=False))
    return texts


def _expected_split(config: DataPrepConfig) -> dict[str, list[str]]:
    split: dict[str, list[str]] = {"train": [], "valid": []}
    for i, text in enumerate(open_source(config).documents()):
        valid = is_validation_document(i, config.split_seed, config.validation_fraction)
        split["valid" if valid else "train"].append(text)
    return split


def test_round_trip_and_manifest(tiny):
    manifest = load_manifest(tiny, verify_hashes=True)
    expected = _expected_split(tiny_config(tiny))
    for split in ("train", "valid"):
        assert _decoded_documents(tiny, split) == expected[split]
        assert manifest["splits"][split]["documents"] == len(expected[split])
    assert manifest["source"]["python_version"] == ".".join(map(str, sys.version_info[:3]))
    assert manifest["dtype"] == "uint16" and manifest.vocab_size == 2048
    assert manifest["tokenizer"]["eod_token"] == "<|endoftext|>"
    assert {"megatron-core", "tokenizers", "datasets"} <= set(manifest["versions"])
    assert json.loads((tiny / "manifest.json").read_text()) == dict(manifest)


def test_stdlib_order_is_fixed_and_real():
    root, files = stdlib_files()
    assert files == sorted(files, key=lambda p: p.relative_to(root).as_posix())
    assert len(files) > 500 and not any("site-packages" in p.parts for p in files)


def _prepare_in_subprocess(out: Path) -> subprocess.Popen:
    code = (
        "import json, sys; from data_prep.testing import tiny_config; "
        "from data_prep import prepare; m = prepare(tiny_config(sys.argv[1])); "
        "print(json.dumps(m['splits']))"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-c", code, str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )


def test_split_and_tokens_identical_across_processes(tiny, tmp_path):
    """Two fresh processes (BPE training included) produce byte-identical splits."""
    procs = [_prepare_in_subprocess(tmp_path / name) for name in ("a", "b")]
    results = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr[-3000:]
        results.append(json.loads(stdout.strip().splitlines()[-1]))
    assert results[0] == results[1] == load_manifest(tiny)["splits"]


def test_reuse_does_no_work_and_force_rebuilds(tmp_path, monkeypatch):
    config = tiny_config(tmp_path / "d")
    config.max_bytes = 300_000
    first = prepare(config)
    inode = (tmp_path / "d" / "train.bin").stat().st_ino

    def no_work(*_args, **_kwargs):
        raise AssertionError("a prepared directory was read, tokenised or written again")

    with monkeypatch.context() as m:  # no work: no source opened, nothing encoded or written
        for name in ("open_source", "_write_splits", "_train_tokenizer"):
            m.setattr(preparation, name, no_work)
        again = prepare(config)
    assert (tmp_path / "d" / "train.bin").stat().st_ino == inode
    assert again == first
    rebuilt = prepare(config, force=True)
    assert (tmp_path / "d" / "train.bin").stat().st_ino != inode
    assert rebuilt["splits"] == first["splits"]
    assert not list(tmp_path.glob(".d.*-*"))  # no temporary or old directories left


def test_changed_settings_are_not_silently_reused(tmp_path):
    config = tiny_config(tmp_path / "d")
    config.max_bytes = 200_000
    prepare(config)
    config.vocab_size = 1024
    with pytest.raises(ValueError, match=r"different settings \(vocab_size\).*--force"):
        prepare(config)


def test_sigkill_midway_leaves_nothing_that_loads(tmp_path):
    out = tmp_path / "big"
    code = (
        "import sys; from data_prep import DataPrepConfig, prepare; "
        "prepare(DataPrepConfig(output_dir=sys.argv[1], vocab_size=1024, "
        "tokenizer_train_bytes=10**6))"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", code, str(out)], cwd=REPO, env=env)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            partial = list(tmp_path.glob(".big.tmp-*/train.bin"))
            if partial and partial[0].stat().st_size > 1_000_000:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "prepare finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert list(tmp_path.glob(".big.tmp-*")), "the partial output should be under a temp name"
    assert not out.exists()
    with pytest.raises(ValueError, match="no such prepared dataset"):
        load_manifest(out)
    small = tiny_config(out)
    small.max_bytes = 100_000
    prepare(small)  # the next prepare clears the leftover and completes
    assert not list(tmp_path.glob(".big.tmp-*"))
    load_manifest(out, verify_hashes=True)


def _corpus(count: int = 30) -> list[str]:
    _, files = stdlib_files()
    return [p.read_text(encoding="utf-8") for p in files[200 : 200 + count]]


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "txt"])
def test_local_sources_round_trip(tmp_path, fmt):
    texts = [t for t in _corpus() if t] + ["a literal <|endoftext|> inside text stays text\n"]
    src = tmp_path / "src"
    src.mkdir()
    if fmt == "jsonl":
        with open(src / "part.jsonl", "w") as f:
            for text in texts:
                f.write(json.dumps({"content": text, "id": 1}) + "\n")
    elif fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"content": texts}), src / "part.parquet")
    else:
        for i, text in enumerate(texts):
            (src / f"{i:03d}.txt").write_text(text)
    config = DataPrepConfig(
        source=str(src),
        output_dir=str(tmp_path / "out"),
        text_field="content",
        vocab_size=600,
        validation_fraction=0.3,
    )
    prepare(config)
    expected = _expected_split(config)
    assert _decoded_documents(tmp_path / "out", "train") == expected["train"]
    assert _decoded_documents(tmp_path / "out", "valid") == expected["valid"]
    assert sorted(expected["train"] + expected["valid"]) == sorted(texts)


def test_pretrained_tokenizer_by_path_and_int32(tiny, tmp_path):
    """A saved tokenizer.json is usable as `tokenizer`, and int32 storage round-trips."""
    shutil.copy(tiny / "tokenizer.json", tmp_path / "tokenizer.json")
    config = tiny_config(tmp_path / "out")
    config.tokenizer, config.dtype, config.max_bytes = str(tmp_path), "int32", 300_000
    manifest = prepare(config)
    assert manifest["dtype"] == "int32" and manifest.vocab_size == 2048
    assert _decoded_documents(tmp_path / "out", "train") == _expected_split(config)["train"]


def test_num_proc_gives_identical_output(tmp_path):
    config = tiny_config(tmp_path / "one")
    config.max_bytes = 5_000_000  # more than one encode batch (4 MB)
    one = prepare(config)
    config.output_dir, config.num_proc = str(tmp_path / "two"), 2
    two = prepare(config)
    assert one["splits"] == two["splits"]


@pytest.mark.parametrize("streaming", [False, True], ids=["download", "streaming"])
def test_hf_source_from_a_local_dataset_repo(tmp_path, streaming):
    """`hf:` goes through datasets.load_dataset; a local repo folder needs no hub."""
    repo = tmp_path / "repo"
    repo.mkdir()
    texts = [t for t in _corpus(20) if t]
    rows = "".join(json.dumps({"text": t}) + "\n" for t in texts)
    (repo / "train.jsonl").write_text(rows)
    config = DataPrepConfig(
        source=f"hf:{repo}::train",
        output_dir=str(tmp_path / "out"),
        vocab_size=600,
        validation_fraction=0.3,
        streaming=streaming,
    )
    manifest = prepare(config)
    assert manifest["source"]["kind"] == "hf" and manifest["source"]["split"] == "train"
    expected = _expected_split(config)
    assert sorted(expected["train"] + expected["valid"]) == sorted(texts)
    assert _decoded_documents(tmp_path / "out", "valid") == expected["valid"]
