"""Per-step cost of reducing the training loss over data-parallel ranks: today's methods and the
device-side sum, measured side by side in one run.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_loss_reduction.py [--ranks 2] [--steps 60]

Each rank runs steps of `--microbatches` micro-batches; a micro-batch's "loss" comes from real
work on the device (a chain of GEMMs, `--size`², about the time of a small model's micro-batch).
The arms differ only in how the step's mean loss becomes a float known on every rank:

    none          no reduction (the floor: work, then one device sync)
    host-each     a host copy of each micro-batch's loss as it is made (`.cpu()` per micro-
                  batch: what the deepspeed engine did), then an all-reduce of a CPU tensor
    float-after   a `float()` of each micro-batch's loss after the last one, then an all-reduce
                  of a CPU tensor (what the megatron engine did)
    device-sum    the losses summed on the device, one all-reduce of that device tensor, one
                  host read (`jobs.engines.collectives.sum_over`: what both engines do now)

On a GPU the default group is `models.runtime`'s `cpu:gloo,cuda:nccl` (device tensors go to
NCCL, CPU tensors to gloo); on a CPU, gloo. Prints ms/step per arm and the reduction's cost over
the `none` floor (a step ends when its slowest rank ends, so that cost includes rank skew).

Measured 2026-12-01 on the shared 2-core CPU box, 2 gloo ranks, 60 steps (medians):

    micro-batches  arm          ms/step  reduction ms
    8              none           1.263
                   host-each      2.899         1.635
                   float-after    2.880         1.617
                   device-sum     2.919         1.655
    32             none           4.637
                   host-each      9.160         4.523
                   float-after    9.110         4.473
                   device-sum     9.156         4.520

On a CPU the arms are equal within noise: the host is the device, so a host read costs nothing
and the gloo all-reduce (and rank skew) is the whole cost. The difference the device-side sum
makes is on a GPU, where each host read waits for the queued kernels; no GPU figure yet.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo, for tests.*

from tests.distributed import run_ranks  # noqa: E402

ARMS = ["none", "host-each", "float-after", "device-sum"]


def _bench(rank: int, world_size: int, args: dict) -> dict[str, list[float]]:
    import torch
    import torch.distributed as dist

    from jobs.engines.collectives import loss_device, sum_over
    from models import runtime

    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(runtime.cuda_device_index(rank))
    runtime.init_distributed()
    device = loss_device()
    dtype = torch.bfloat16 if cuda else torch.float32
    size, count = args["size"], args["microbatches"]
    weight = torch.randn(size, size, device=device, dtype=dtype) / size**0.5
    inputs = torch.randn(size, size, device=device, dtype=dtype)

    def microbatch() -> torch.Tensor:
        x = inputs
        for _ in range(4):
            x = torch.tanh(x @ weight)
        return x.float().pow(2).mean()  # a 0-d loss on the device

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def step(arm: str) -> float:
        if arm == "host-each":
            total = torch.zeros(1, dtype=torch.float64)
            for _ in range(count):
                total += microbatch().detach().double().cpu()
            dist.all_reduce(total)
            return float(total) / (count * world_size)
        losses = [microbatch().detach() for _ in range(count)]
        if arm == "none":
            sync()
            return 0.0
        if arm == "float-after":
            total = torch.zeros(2, dtype=torch.float64)
            total[0] = sum(float(loss) for loss in losses)
            total[1] = count
            dist.all_reduce(total)
            return float(total[0] / total[1])
        total = torch.zeros(2, dtype=torch.float64, device=device)
        total[0] = torch.stack(losses).double().sum()
        total[1] = count
        sum_over(total)
        return float(total[0] / total[1])

    times: dict[str, list[float]] = {arm: [] for arm in ARMS}
    values: dict[str, float] = {}
    for repeat in range(args["steps"] + 5):
        for arm in ARMS:  # interleaved, so drift on a shared machine hits every arm alike
            dist.barrier()
            sync()
            start = time.perf_counter()
            values[arm] = step(arm)
            sync()
            if repeat >= 5:
                times[arm].append(time.perf_counter() - start)
    reduced = [values[arm] for arm in ARMS[1:]]
    assert max(reduced) - min(reduced) < 1e-6 * abs(reduced[0]), values  # same mean loss
    runtime.destroy()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--size", type=int, default=None, help="GEMM size (default: by device)")
    args = parser.parse_args()
    import torch

    cuda = torch.cuda.is_available()
    if cuda and torch.cuda.device_count() < args.ranks:
        args.ranks = torch.cuda.device_count()
    size = args.size or (4096 if cuda else 128)
    opts = {"size": size, "microbatches": args.microbatches, "steps": args.steps}
    per_rank = run_ranks(_bench, args.ranks, opts)
    # a step ends when its slowest rank ends
    steps = {arm: [max(r[arm][i] for r in per_rank) for i in range(args.steps)] for arm in ARMS}
    floor = statistics.median(steps["none"])
    device = torch.cuda.get_device_name() if cuda else "cpu (gloo)"
    print(f"\n{device}, {args.ranks} ranks, {args.microbatches} micro-batches of {size}² GEMMs x4")
    print(f"{'arm':12s} {'ms/step':>9s} {'reduction ms':>13s} {'vs device-sum':>14s}")
    best = statistics.median(steps["device-sum"]) - floor
    for arm in ARMS:
        median = statistics.median(steps[arm])
        cost = median - floor
        ratio = f"{cost / best:14.2f}" if arm != "none" and best > 0 else f"{'':14s}"
        print(f"{arm:12s} {median * 1e3:9.3f} {cost * 1e3:13.3f} {ratio}")


if __name__ == "__main__":
    main()
