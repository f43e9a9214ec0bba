"""The rendezvous and its port.

A one-rank job opens no port: submitit exports MASTER_PORT from the job id even for one task,
and when another socket held that port such cells died with EADDRINUSE before training. A
multi-rank job's port lies below the kernel's ephemeral range, where no outgoing connection can
hold it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from models import runtime

REPO = Path(__file__).resolve().parents[2]
CHILD = """
import torch.distributed as dist
from models.runtime import init_distributed
init_distributed()
print("ok", dist.get_world_size(), dist.get_rank())
"""


def test_a_one_rank_launch_on_a_taken_port_still_initialises():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        env = {
            **os.environ,
            "RANK": "0",
            "WORLD_SIZE": "1",
            "LOCAL_RANK": "0",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "OMP_NUM_THREADS": "1",
            "PYTHONPATH": str(REPO),
        }
        out = subprocess.run(
            [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120
        )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-3:] == ["ok", "1", "0"]


@pytest.mark.parametrize(
    ("ephemeral", "allowed"),
    [
        ((32768, 60999), (20000, 32767)),
        ((1024, 60000), (60001, 65535)),
        ((1024, 65000), (20000, 60000)),
    ],
)
def test_the_rendezvous_port_is_one_per_job_and_outside_the_ephemeral_range(
    monkeypatch, ephemeral, allowed
):
    monkeypatch.setattr(runtime, "_ephemeral_range", lambda: ephemeral)
    ids = [str(n) for n in range(8000, 9000)] + [f"{n}_{k}" for n in range(1, 60) for k in range(8)]
    ports = [runtime.rendezvous_port(i) for i in ids]
    assert all(allowed[0] <= p <= allowed[1] for p in ports)
    assert [runtime.rendezvous_port(i) for i in ids] == ports  # every task of a job agrees
    assert len(set(ports)) > 0.8 * len(ids)  # spread: concurrent jobs rarely share one


def test_this_machine_gives_ports_below_its_ephemeral_range():
    low, _ = runtime._ephemeral_range()
    if low < 21000:
        pytest.skip(f"ephemeral range starts at {low}: no room below it on this machine")
    assert all(20000 <= runtime.rendezvous_port(str(pid)) < low for pid in range(100, 400))


@pytest.mark.parametrize("rank", [0, 1])
def test_a_rank_whose_peer_never_comes_fails_at_the_rendezvous_timeout(rank):
    from tests.distributed import free_port

    env = {
        **os.environ,
        "RANK": str(rank),
        "WORLD_SIZE": "2",
        "LOCAL_RANK": str(rank),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "SCALING_RENDEZVOUS_TIMEOUT_S": "3",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(REPO),
    }
    out = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode != 0
    assert f"rank {rank} of 2: the rendezvous at 127.0.0.1:" in out.stderr, out.stderr[-3000:]
    assert "within 3 s (SCALING_RENDEZVOUS_TIMEOUT_S)" in out.stderr
