"""A local study on a GPU machine trains on its GPUs: the local executor asks submitit for them
(without the request submitit hides every GPU with CUDA_VISIBLE_DEVICES="")."""

from __future__ import annotations

import os

import submitit

from scaling.backends.local.devices import local_gpus


def _visible() -> str:
    return os.environ["CUDA_VISIBLE_DEVICES"]


def test_the_machines_gpus_reach_the_job(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3,5")
    assert local_gpus(2) == {"gpus_per_node": 2, "visible_gpus": (2, 3, 5)}
    assert local_gpus(8)["gpus_per_node"] == 3  # more ranks than devices share them
    executor = submitit.LocalExecutor(folder=tmp_path / "submitit")
    executor.update_parameters(timeout_min=1, **local_gpus(2))
    assert executor.submit(_visible).result() == "2,3"  # what the job's process sees
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert local_gpus(2) == {}  # the user hid them: a CPU run, as asked
    executor.update_parameters(timeout_min=1, gpus_per_node=0)
    assert executor.submit(_visible).result() == ""
