"""Checkpoints are atomic and resume picks the newest complete, readable one."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch

from jobs.checkpoints.checkpoint import (
    list_checkpoints,
    load_newest,
    load_step,
    save_checkpoint,
    shared_from,
)


def test_newest_complete_checkpoint_wins_and_old_ones_are_pruned(tmp_path):
    root = tmp_path / "ckpt"
    for step in (2, 4, 6):
        save_checkpoint(root, step, {"step": step, "w": torch.full((3,), float(step))}, keep=2)
    assert [s for s, _ in list_checkpoints(root)] == [6, 4]
    # an interrupted save leaves only a .tmp directory, which resume ignores
    (root / "step_00000008.tmp").mkdir()
    torch.save({"step": 8}, root / "step_00000008.tmp" / "rank_00000.pt")
    payload = load_newest(root)
    assert payload["step"] == 6 and torch.equal(payload["w"], torch.full((3,), 6.0))


def test_corrupt_newest_falls_back_to_the_previous(tmp_path):
    root = tmp_path / "ckpt"
    save_checkpoint(root, 1, {"step": 1}, keep=3)
    save_checkpoint(root, 2, {"step": 2}, keep=3)
    (root / "step_00000002" / "rank_00000.pt").write_bytes(b"not a checkpoint")
    assert load_newest(root)["step"] == 1


class Opaque:
    """Any non-allowlisted class: what weights_only=True must refuse to unpickle."""


def test_payloads_with_objects_are_refused_on_load(tmp_path):
    root = tmp_path / "ckpt"
    save_checkpoint(root, 1, {"step": 1}, keep=3)
    save_checkpoint(root, 2, {"obj": Opaque()}, keep=3)
    assert load_newest(root)["step"] == 1  # weights_only=True will not unpickle Opaque


def test_a_checkpoint_of_another_layout_is_refused(tmp_path):
    root = tmp_path / "ckpt"
    layout = {"tensor_parallel": 2, "pipeline_parallel": 1, "data_parallel": 1}
    save_checkpoint(root, 1, {"step": 1}, keep=3, layout=layout)
    assert (
        json.loads((root / "step_00000001" / "complete.json").read_text())["tensor_parallel"] == 2
    )
    with pytest.raises(ValueError, match="tensor_parallel 2, but this run has tensor_parallel 1"):
        load_newest(root, layout={**layout, "tensor_parallel": 1})
    assert load_newest(root, layout=layout)["step"] == 1


def test_shared_entries_are_read_from_the_rank_that_wrote_them(tmp_path):
    """A DP rank's file names the rank holding its replicated state; a load fills it in, and a
    checkpoint whose holder's file is unreadable is skipped like any unreadable one."""
    root = tmp_path / "ckpt"
    model = {"w": torch.arange(4.0)}
    for step in (1, 2):
        payload = {"engine": {"model": shared_from(1), "optimizer": {"m": step}}, "step": step}
        path = save_checkpoint(root, step, payload, keep=3)
        holder = {"engine": {"model": model, "optimizer": {}}, "step": step}
        torch.save(holder, path / "rank_00001.pt")
    (root / "step_00000002" / "rank_00001.pt").write_bytes(b"torn")
    loaded = load_newest(root)
    assert loaded["step"] == 1 and loaded["engine"]["optimizer"] == {"m": 1}
    assert torch.equal(loaded["engine"]["model"]["w"], model["w"])


def _overwrite_middle(path, num_bytes: int = 4000) -> None:
    """What a bad disk block or a stray write does: the file keeps its size and still unpickles."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2 - num_bytes // 2
    data[middle : middle + num_bytes] = b"\xff" * num_bytes  # NaN in float32 tensors
    path.write_bytes(bytes(data))


def test_a_damaged_newest_checkpoint_is_skipped_by_its_checksum(tmp_path, capsys):
    """Issue 55 #8: 4,000 bytes overwritten in the middle of the newest rank file used to load
    (NaN weights, then a `diverged` result); its sha256 fails, the previous step is resumed,
    and the log says which checkpoint was skipped. With none intact the run starts afresh."""
    root = tmp_path / "ckpt"
    weights = {
        step: torch.randn(50_000, generator=torch.Generator().manual_seed(step)) for step in (1, 2)
    }
    for step, w in weights.items():
        save_checkpoint(root, step, {"step": step, "w": w}, keep=3)
    newest = root / "step_00000002" / "rank_00000.pt"
    manifest = json.loads((root / "step_00000002" / "complete.json").read_text())
    recorded = manifest["files"]["rank_00000.pt"]
    assert recorded == {
        "sha256": hashlib.sha256(newest.read_bytes()).hexdigest(),
        "bytes": newest.stat().st_size,
    }
    assert not list((root / "step_00000002").glob(".rank_*"))  # the digest sidecars are gone

    _overwrite_middle(newest)
    loaded = load_newest(root)
    assert loaded["step"] == 1 and torch.equal(loaded["w"], weights[1])
    log = capsys.readouterr().out
    assert f"checkpoint {newest} is damaged: its sha256 differs" in log, log
    assert "resuming from step 1, the newest intact checkpoint" in log and "skipped step 2" in log
    with pytest.raises(FileNotFoundError, match="damaged"):
        load_step(root / "step_00000002")  # a fork has no older one: it refuses

    _overwrite_middle(root / "step_00000001" / "rank_00000.pt")
    assert load_newest(root) is None
    assert "no intact checkpoint under" in capsys.readouterr().out


def test_an_unreadable_manifest_skips_its_checkpoint(tmp_path):
    root = tmp_path / "ckpt"
    save_checkpoint(root, 1, {"step": 1}, keep=3)
    save_checkpoint(root, 2, {"step": 2}, keep=3)
    (root / "step_00000002" / "complete.json").write_bytes(b"\xff\xfe{")
    assert load_newest(root)["step"] == 1
