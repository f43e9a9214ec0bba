"""One concurrent writer: a tiny torch model trained for N steps, logging like `jobs` does.

    python -m tests.reliability._writer OUTPUT_DIR TRACKING_URI EXPERIMENT STEPS SEED

The concurrency test runs 16 of these at once. A full `python -m jobs` process costs ~35 ms a
step on one core (megatron's per-step overhead) plus ~8 s to exit, so 16 x 1,000 steps of it
take over 10 minutes on 2 cores; this loop keeps what the tracking server sees (the job's own
`Tracker`, metrics every step, one run per process) at a fraction of that.
Writes the losses it logged to OUTPUT_DIR/losses.json so the test can compare values.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from jobs.config import TrackingConfig
from jobs.telemetry.tracking import Tracker


def main(out: Path, uri: str, experiment: str, steps: int, seed: int) -> None:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 16))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tracker = Tracker(out, TrackingConfig(tracking_uri=uri, experiment=experiment), f"w{seed}")
    tracker.set_status("RUNNING")
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
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
