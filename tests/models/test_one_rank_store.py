"""A one-rank job opens no port: submitit exports MASTER_PORT from the job id even for one task,
and when another socket held that port such cells died with EADDRINUSE before training."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

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
