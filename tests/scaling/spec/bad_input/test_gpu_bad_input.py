"""A study that asks for GPUs where there are none, or splits them badly, is refused before
anything is submitted: bf16 on a machine without CUDA, a Slurm partition without GPUs, a
tensor-parallel group larger than a node's share."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from scaling.spec.resources import partition_gpus
from tests.scaling.conftest import one_size_spec


def _refused(spec: dict, tmp_path: Path) -> str:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    proc = subprocess.run(
        [sys.executable, "-m", "scaling", "submit", str(path)],
        cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert not Path(spec["output_dir"]).exists()  # nothing written, nothing submitted
    return " ".join(proc.stderr.split())


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_bf16_study_on_a_machine_without_cuda_is_refused(tmp_path, data_dir, mlflow_server):
    spec = one_size_spec(data_dir, tmp_path / "study", mlflow_server, steps=4, precision="bf16")
    err = _refused(spec, tmp_path)
    assert "study.precision: 'bf16' needs a CUDA GPU and this machine has none" in err


@pytest.mark.slurm
def test_gpu_study_on_a_partition_without_gpus_is_refused(
    tmp_path, data_dir, mlflow_server, slurm_cluster
):
    name, gpus = partition_gpus(None)
    if gpus:
        pytest.skip(f"the default partition {name} has GPUs")
    spec = one_size_spec(data_dir, tmp_path / "study", mlflow_server, steps=4, executor="slurm")
    spec["name"] = f"refused-{os.getpid()}"  # its own job name: another suite may share the cluster
    spec["slurm"]["gpus_per_node"] = 4
    # TP 8 splits this shape (and the vocabulary) evenly, but not into one node of 4 GPUs
    spec["ladder"]["shapes"]["30K"] = {"num_layers": 1, "hidden_size": 64, "num_attention_heads": 8}
    spec["parallel"] = {"30K": {"tensor_parallel": 8}}
    err = _refused(spec, tmp_path)
    assert f"study.slurm.partition: '{name}' has no GPUs" in err
    assert "study.slurm.gpus_per_node is 4; pick a GPU partition" in err
    assert (
        "study.parallel.30K.tensor_parallel: 8 does not divide study.slurm.gpus_per_node=4" in err
    )
    queue = subprocess.run(["squeue", "-h", "-n", f"scaling-{spec['name']}"], capture_output=True)
    assert queue.stdout.strip() == b""
