"""Concurrent writers: tiny torch models trained for N steps, each logging like `jobs` does.

    python -m tests.reliability._writer ROOT TRACKING_URI EXPERIMENT STEPS WRITERS

The concurrency test runs 16 writers at once. A full `python -m jobs` process costs ~35 ms a
step on one core (megatron's per-step overhead) plus ~8 s to exit, so 16 x 1,000 steps of it
take over 10 minutes on 2 cores; this loop keeps what the tracking server sees (the job's own
`Tracker`, metrics every step, one run per process) at a fraction of that.

One launcher imports torch and MLflow once and forks the WRITERS processes, as the local
backend forks its cells from a warm process (`scaling.warmstart`): sixteen interpreters each
importing both cost more CPU than all their logging. Nothing in the launcher touches MLflow, so
each child opens its own connections. Writer i works in ROOT/wNN (its log in `log.txt`, the
losses it logged in `losses.json`), makes its run, writes `ready` there and waits for ROOT/go
before its first step, so every writer's upload meets the others' at the server. The launcher
exits 0 only if every writer did; ROOT/exit_codes.json has each one's.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

import torch

# what a writer's Tracker imports when it first talks to the server, imported once here (no
# connection is made: each forked writer opens its own)
from mlflow.entities import Metric, Param, RunTag  # noqa: F401
from mlflow.exceptions import MlflowException  # noqa: F401
from mlflow.tracking import MlflowClient  # noqa: F401

from jobs.config import TrackingConfig
from jobs.telemetry.tracking import Tracker

GO_WAIT_S = 1800


def writer(out: Path, uri: str, experiment: str, steps: int, seed: int, go: Path) -> int:
    """One writer's whole life; its exit code."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 16))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tracker = Tracker(out, TrackingConfig(tracking_uri=uri, experiment=experiment), f"w{seed}")
    tracker.set_status("RUNNING")
    (out / "ready").touch()
    deadline = time.monotonic() + GO_WAIT_S
    while not go.exists():
        if time.monotonic() > deadline:
            print(f"no {go} after {GO_WAIT_S} s", flush=True)
            return 1
        time.sleep(0.05)
    losses = []
    for step in range(1, steps + 1):
        x = torch.randn(8, 16)
        loss = torch.nn.functional.mse_loss(model(x), x)
        opt.zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item()
        opt.step()
        losses.append(loss.item())
        # two metrics a step: the single-worker server stores ~500 points/s on 2 busy cores
        tracker.log_metrics({"train/loss": loss.item(), "grad_norm": grad_norm}, step=step)
    tracker.set_status("FINISHED")
    ok = tracker.close(timeout_s=300)
    (out / "losses.json").write_text(json.dumps({"run_id": tracker.run_id, "losses": losses}))
    return 0 if ok else 1


def _child(out: Path, *args) -> None:
    """In a forked child: output to out/log.txt, the writer, then exit with its code."""
    code = 1
    try:
        log = os.open(out / "log.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        code = writer(out, *args)
    except BaseException:  # noqa: BLE001 - reported in the writer's log, exit 1
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main(root: Path, uri: str, experiment: str, steps: int, writers: int) -> int:
    pids = {}
    for i in range(writers):
        out = root / f"w{i:02d}"
        out.mkdir(parents=True, exist_ok=True)
        pid = os.fork()
        if pid == 0:
            _child(out, uri, experiment, steps, i, root / "go")
        pids[pid] = out.name
    codes = {}
    for pid, name in pids.items():
        _, status = os.waitpid(pid, 0)
        codes[name] = os.waitstatus_to_exitcode(status)
    (root / "exit_codes.json").write_text(json.dumps(codes))
    return 0 if set(codes.values()) == {0} else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])))
