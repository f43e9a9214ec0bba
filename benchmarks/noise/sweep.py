"""Seed noise of small CPU recipes: train cells through `jobs.train`, one JSON line per run.

    python benchmarks/noise/sweep.py --data DIR --out results.jsonl --tag byte-600 \
        --shape 2,64,4 --variants linear nonlinear --seeds 0 1 2 --lrs 3e-3 \
        --steps 600 --batch-tokens 2048 --seq 128 --warmup 60

Every cell is a `jobs.RunConfig` run in this process (no MLflow, no start-up cost per cell, so
many cells fit in the time the measurement has). As in a study, data order = `--data-seed` +
seed unless `--fixed-order` keeps it at `--data-seed` (to separate init seed from data order).
Each line holds the final validation loss, the CPU seconds of the run (one thread: load on
the machine does not change it) and its wall seconds (load does).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import torch

from foundation.config import from_dict
from jobs import RunConfig, train


def run_dict(args: argparse.Namespace, variant: str, seed: int, lr: float, out: str) -> dict:
    num_layers, hidden, heads = (int(x) for x in args.shape.split(","))
    vocab = json.loads((Path(args.data) / "manifest.json").read_text())["vocab_size"]
    data_seed = args.data_seed + (0 if args.fixed_order else seed)
    return {
        "name": f"{args.tag}-{variant}-s{seed}-lr{lr:g}",
        "study": "noise",
        "seed": args.init_offset if args.fixed_init else seed + args.init_offset,
        "output_dir": out,
        "model": {
            "vocab_size": vocab,
            "seq_length": args.seq,
            "num_layers": num_layers,
            "hidden_size": hidden,
            "num_attention_heads": heads,
            "query_variant": variant,
            "init_std": args.init_std,
            "position_embedding": args.position,
            "qk_norm": args.qk_norm,
        },
        "data": {"path": args.data, "seed": data_seed, "num_val_windows": args.val_windows},
        "train": {
            "steps": args.steps,
            "global_batch_tokens": args.batch_tokens,
            "micro_batch_size": args.batch_tokens // args.seq,
            "eval_interval": 0,
            "log_interval": 10**6,
        },
        "optimizer": {"lr": lr, "beta2": args.beta2, "weight_decay": 0.1, "grad_clip": 1.0},
        "schedule": {
            "kind": args.schedule,
            "warmup_steps": args.warmup,
            "min_lr_ratio": args.min_lr_ratio,
        },
        "precision": "fp32",
        "tracking": {"enabled": False},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--data", required=True, help="a directory made by `scaling prepare-data`")
    p.add_argument("--out", required=True, help="JSON-lines file to append to")
    p.add_argument("--tag", required=True, help="recipe name written on every line")
    p.add_argument("--shape", required=True, help="num_layers,hidden_size,num_attention_heads")
    p.add_argument("--variants", nargs="+", default=["linear", "nonlinear"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--lrs", nargs="+", type=float, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--batch-tokens", type=int, default=2048)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--schedule", default="cosine", choices=["cosine", "wsd"])
    p.add_argument("--min-lr-ratio", type=float, default=0.1)
    p.add_argument("--init-std", type=float, default=0.02)
    p.add_argument("--position", default="learned", choices=["learned", "rope"])
    p.add_argument("--val-windows", type=int, default=256)
    p.add_argument("--qk-norm", action="store_true", help="normalise queries and keys")
    p.add_argument("--beta2", type=float, default=0.99)
    p.add_argument("--data-seed", type=int, default=1234)
    p.add_argument("--fixed-order", action="store_true", help="same data order for every seed")
    p.add_argument("--init-offset", type=int, default=0, help="init seed = seed + this")
    p.add_argument("--fixed-init", action="store_true", help="init seed = --init-offset always")
    args = p.parse_args()
    torch.set_num_threads(1)

    for variant in args.variants:
        for lr in args.lrs:
            for seed in args.seeds:
                out = tempfile.mkdtemp(prefix="noise-")
                config = from_dict(RunConfig, run_dict(args, variant, seed, lr, out), where="run")
                cpu0, wall0 = time.process_time(), time.perf_counter()
                result = train(config)
                cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
                shutil.rmtree(out, ignore_errors=True)
                row = {
                    "tag": args.tag,
                    "shape": args.shape,
                    "variant": variant,
                    "seed": seed,
                    "init_seed": config.seed,
                    "data_seed": config.data.seed,
                    "lr": lr,
                    "steps": args.steps,
                    "batch_tokens": args.batch_tokens,
                    "seq": args.seq,
                    "warmup": args.warmup,
                    "schedule": args.schedule,
                    "val_windows": args.val_windows,
                    "position": args.position,
                    "init_std": args.init_std,
                    "min_lr_ratio": args.min_lr_ratio,
                    "qk_norm": args.qk_norm,
                    "beta2": args.beta2,
                    "data": os.path.basename(args.data.rstrip("/")),
                    "status": result.status,
                    "loss": result.final_val_loss,
                    "cpu_s": round(cpu, 2),
                    "wall_s": round(wall, 2),
                }
                with open(args.out, "a") as f:
                    f.write(json.dumps(row) + "\n")
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
