"""Run a function on N gloo ranks in fresh processes and collect what each rank returns.

The function must be importable at module level (processes are spawned, not forked), and its
return value must be picklable (these are the test's own objects, never outside data).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue as queues
import random
import shutil
import socket
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any


def free_port() -> int:
    """A port that is free now, below the ephemeral range (`free_port_run`). The kernel's own
    pick (binding port 0) is an ephemeral port, which another test's outgoing connection took
    between the pick and a TCP store's bind in one full run (EADDRINUSE, then a 300 s wait)."""
    return free_port_run(1)


def free_port_run(count: int) -> int:
    """The first of `count` consecutive ports that are all free now, below the kernel's
    ephemeral range: an ephemeral port (the kernel's pick for port 0) may be taken by any
    outgoing connection (the MLflow server's to PostgreSQL, a client's to the server) before the
    daemon that was given it binds it, and a run of ports needs each of them checked."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default
    first, last = (10000, low - count) if low - count > 11000 else (1024, 10000)
    pick = random.Random()
    for _ in range(500):
        base = pick.randint(first, last)
        socks = [socket.socket() for _ in range(count)]
        try:
            for i, sock in enumerate(socks):
                sock.bind(("127.0.0.1", base + i))
            return base
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise RuntimeError(f"no {count} consecutive free ports between {first} and {last}")


RENDEZVOUS_DIR_ENV = "TEST_RENDEZVOUS_DIR"  # where rank 0 tells the others each next port


def next_rendezvous_port() -> None:
    """A fresh MASTER_PORT for the next process group of this launch, the same on every rank.

    Rank 0 takes a port the kernel says is free at this moment and leaves it in the launch's
    folder; the other ranks wait for it. (Counting up from the first port collided with ports
    other test workers held meanwhile: one rank's TCP store failed to bind, the other waited.)
    """
    count = int(os.environ.get("TEST_RENDEZVOUS_COUNT", "0")) + 1
    os.environ["TEST_RENDEZVOUS_COUNT"] = str(count)
    path = os.path.join(os.environ[RENDEZVOUS_DIR_ENV], f"port-{count}")
    if os.environ["RANK"] == "0":
        with open(path + ".tmp", "w") as out:
            out.write(str(free_port()))
        os.replace(path + ".tmp", path)
    deadline = time.monotonic() + 300
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank 0 gave no rendezvous port ({path})")
        time.sleep(0.05)
    with open(path) as given:
        os.environ["MASTER_PORT"] = given.read()


def _worker(fn, rank, world_size, port, folder, args, queue) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        TEST_RENDEZVOUS_DIR=folder,
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(world_size),
        OMP_NUM_THREADS="1",
    )
    try:
        import torch

        torch.set_num_threads(1)
        queue.put((rank, True, fn(rank, world_size, *args)))
    except BaseException:  # noqa: BLE001 - reported to the parent with its traceback
        queue.put((rank, False, traceback.format_exc()))


def run_ranks(fn: Callable[..., Any], world_size: int, *args: Any, timeout: float = 600) -> list:
    """``[fn(0, world_size, *args), ..., fn(world_size - 1, world_size, *args)]``."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    folder = tempfile.mkdtemp(prefix="ranks-")
    procs = [
        ctx.Process(
            target=_worker, args=(fn, rank, world_size, port, folder, args, queue), daemon=True
        )
        for rank in range(world_size)
    ]
    for proc in procs:
        proc.start()
    results: dict[int, Any] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(results) < world_size:
            try:
                rank, ok, value = queue.get(timeout=1.0)
            except queues.Empty:
                _check_alive(procs, results, queue, deadline, timeout)
                continue
            if not ok:
                raise RuntimeError(f"rank {rank} failed:\n{value}")
            results[rank] = value
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
        shutil.rmtree(folder, ignore_errors=True)
    return [results[r] for r in range(world_size)]


def _check_alive(procs, results, queue, deadline: float, timeout: float) -> None:
    """Raise at once when a rank died without a word (a crash in C++), or past the deadline."""
    dead = [r for r, p in enumerate(procs) if p.exitcode is not None and r not in results]
    if dead:
        try:  # what it put just before its exit may still be in the pipe
            rank, ok, value = queue.get(timeout=2.0)
        except queues.Empty:
            codes = {r: procs[r].exitcode for r in dead}
            raise RuntimeError(f"rank(s) {dead} exited with {codes} and reported nothing") from None
        if not ok:
            raise RuntimeError(f"rank {rank} failed:\n{value}")
        results[rank] = value
    elif time.monotonic() > deadline:
        raise TimeoutError(
            f"ranks {sorted(set(range(len(procs))) - set(results))} gave no "
            f"result within {timeout:.0f} s"
        )
