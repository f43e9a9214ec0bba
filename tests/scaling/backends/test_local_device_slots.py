"""Concurrent local cells on a GPU machine get disjoint GPUs, and no cell gets fewer GPUs than
ranks, whatever the precision. Only the device list is faked (CUDA_VISIBLE_DEVICES); the slot
logic, the submitit request and what each job's process sees are real."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import submitit

from foundation.config import Problems
from scaling.backends.local.devices import DeviceSlots, gpu_params, visible_gpu_indices
from scaling.backends.local.executor import check_no_oversubscription

REPO = Path(__file__).resolve().parents[3]


def _visible() -> str:
    return os.environ["CUDA_VISIBLE_DEVICES"]


def test_concurrent_cells_get_their_own_gpus(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3,5,7")
    slots = DeviceSlots(visible_gpu_indices())
    first, second = slots.take(2), slots.take(2)
    assert (first, second) == ((2, 3), (5, 7))
    assert slots.take(1) is None  # all held: the next cell waits for one to end
    executor = submitit.LocalExecutor(folder=tmp_path / "submitit")
    seen = []
    for gpus in (first, second):
        executor.update_parameters(timeout_min=1, **gpu_params(gpus))
        seen.append(executor.submit(_visible))
    assert [job.result() for job in seen] == ["2,3", "5,7"]  # what each job's process sees
    slots.give_back(first)
    assert slots.take(2) == (2, 3)
    with pytest.raises(ValueError, match="needs 5 GPUs .* shows 4"):
        slots.take(5)


def test_uuid_devices_and_no_devices_keep_the_old_request(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1a2b,GPU-3c4d")
    assert visible_gpu_indices() == []  # not sliceable: local_gpus shares them as before
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpu_indices() == []


@pytest.mark.parametrize("precision", ["auto", "fp32"])
def test_oversubscription_is_refused_whatever_the_precision(monkeypatch, precision):
    import dataclasses

    from scaling.spec.loader import read_study

    spec = read_study(REPO / "studies" / "ladder.yaml").spec  # DP 4, 8 and TP2 x DP8 = 16
    spec = dataclasses.replace(spec, precision=precision)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7")
    p = Problems()
    check_no_oversubscription(spec, len(visible_gpu_indices()), p)
    text = "\n".join(p.items)
    assert "size 680M needs 16 GPUs" in text and "shows 8" in text
    assert "350M" not in text  # 8 ranks on 8 devices: fine
