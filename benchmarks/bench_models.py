"""Train-step time (forward + backward + AdamW) of each query variant vs a plain PyTorch GPT.

    .venv/bin/python benchmarks/bench_models.py --quick     # ~3 min on 2 CPU cores
    .venv/bin/python benchmarks/bench_models.py             # more steps, larger batch

All models of one size are stepped round-robin in the same process (one step each per round,
median over rounds), so load from other processes hits them alike. Ratios use this process's
CPU time per step (``time.process_time``), which other processes' load disturbs far less than
wall time on a shared machine; wall time is printed too. Default: 1 intra-op thread.
The megatron models run in a 1-rank gloo group with the CPU adapter; the plain model runs with
torch-function handling off, so the adapter's per-op overhead counts against megatron.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from benchmarks.plain_gpt import PlainGPT  # noqa: E402
from models import ModelConfig, accounting, build_gpt  # noqa: E402

VARIANTS = ("linear", "identity", "nonlinear", "residual_linear")
# d -> (layers, heads): three widths around the d = 512 the targets are set at.
SIZES = {256: (4, 4), 384: (4, 6), 512: (4, 8)}


def _megatron_step(model, optimizer, tokens, labels, positions):
    optimizer.zero_grad(set_to_none=True)
    loss = model(tokens, positions, None, labels=labels).mean()
    loss.backward()
    optimizer.step()


def _plain_step(model, optimizer, tokens, labels):
    with torch._C.DisableTorchFunction():  # no CPU-adapter mode for the plain model
        optimizer.zero_grad(set_to_none=True)
        model(tokens, labels).backward()
        optimizer.step()


def bench_size(d: int, args) -> dict[str, float]:
    layers, heads = SIZES[d]
    base = dict(
        vocab_size=args.vocab,
        seq_length=args.seq,
        num_layers=layers,
        hidden_size=d,
        num_attention_heads=heads,
    )
    gen = torch.Generator().manual_seed(0)
    data = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=gen)
    tokens, labels = data[:, :-1].contiguous(), data[:, 1:].contiguous()
    positions = torch.arange(args.seq).unsqueeze(0).expand(args.batch, -1)
    steps = {}
    torch.manual_seed(0)
    plain = PlainGPT(ModelConfig(**base))
    plain_opt = torch.optim.AdamW(plain.parameters(), lr=1e-4)
    steps["plain"] = lambda: _plain_step(plain, plain_opt, tokens, labels)
    for variant in VARIANTS:
        model = build_gpt(ModelConfig(**base, query_variant=variant), seed=0)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        steps[variant] = lambda m=model, o=opt: _megatron_step(m, o, tokens, labels, positions)
    cpu: dict[str, list[float]] = {name: [] for name in steps}
    wall: dict[str, list[float]] = {name: [] for name in steps}
    for round_ in range(args.warmup + args.rounds):
        for name, step in steps.items():
            start_cpu, start_wall = time.process_time(), time.perf_counter()
            step()
            if round_ >= args.warmup:
                cpu[name].append(time.process_time() - start_cpu)
                wall[name].append(time.perf_counter() - start_wall)
    return {name: (statistics.median(cpu[name]), statistics.median(wall[name])) for name in steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="few rounds, small batch")
    parser.add_argument("--sizes", type=int, nargs="*", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args()
    args.batch = args.batch or (4 if args.quick else 8)
    args.rounds = args.rounds or (5 if args.quick else 15)
    torch.set_num_threads(args.threads)
    print(
        f"batch {args.batch} x seq {args.seq}, vocab {args.vocab}, {args.rounds} rounds "
        f"(median), {torch.get_num_threads()} threads, torch {torch.__version__}"
    )
    header = (
        f"{'d':>4} {'model':>16} {'cpu ms':>8} {'wall ms':>8} {'/plain':>7} {'/linear':>8} "
        f"{'GFLOP/s':>8}"
    )
    print(header)
    for d in args.sizes:
        result = bench_size(d, args)
        layers, heads = SIZES[d]
        plain_cpu, linear_cpu = result["plain"][0], result["linear"][0]
        for name, (seconds, wall) in result.items():
            variant = "linear" if name == "plain" else name
            config = ModelConfig(
                vocab_size=args.vocab,
                seq_length=args.seq,
                num_layers=layers,
                hidden_size=d,
                num_attention_heads=heads,
                query_variant=variant,
            )
            flops = accounting.flops_per_token(config) * args.batch * args.seq
            print(
                f"{d:>4} {name:>16} {seconds * 1e3:>8.1f} {wall * 1e3:>8.1f} "
                f"{seconds / plain_cpu:>7.3f} {seconds / linear_cpu:>8.3f} "
                f"{flops / seconds / 1e9:>8.2f}"
            )


if __name__ == "__main__":
    main()
