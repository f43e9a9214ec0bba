"""Checkpoints are atomic and resume picks the newest complete, readable one."""

from __future__ import annotations

import json

import pytest
import torch

from jobs.checkpoints.checkpoint import list_checkpoints, load_newest, save_checkpoint, shared_from


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
