"""Process start-up: importing megatron-core with its fused kernels compiled at import (as
megatron-core ships) against compiled on first use (`foundation.process.megatron_jit`), side by
side.

    .venv/bin/python benchmarks/bench_import.py            # 6 rounds, ~2 min on 2 cores
    .venv/bin/python benchmarks/bench_import.py --rounds 3

Each round starts one fresh interpreter per way, alternating, so load drifts hit both alike. A
child reports its own CPU time (`time.process_time`) and wall time to import megatron-core and
the project's training stack (`jobs.loop.trainer`, which builds the models); the ratio is deferred /
at import, by the medians. Every training job and rank pays this once at its start.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import json, sys, time
start = time.perf_counter()
if {defer}:
    from foundation.process.megatron_jit import defer_megatron_compile
    defer_megatron_compile()
import megatron.core
import megatron.core.jit
if not {defer}:  # as shipped: the project's packages would install the hook, keep it out
    assert not hasattr(megatron.core.jit.jit_fuser, "deferred_from")
import jobs.loop.trainer
print(json.dumps({{"cpu": time.process_time(), "wall": time.perf_counter() - start,
                  "dynamo": "torch._dynamo" in sys.modules}}))
"""


def one(defer: bool) -> dict:
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", CHILD.format(defer=defer)],
                          cwd=ROOT, capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    rows: dict[bool, list[dict]] = {False: [], True: []}
    for _ in range(args.rounds):
        for defer in (False, True):
            rows[defer].append(one(defer))
    print(f"{'megatron-core fused kernels':<30} {'CPU s':>7} {'wall s':>7}  TorchDynamo imported")
    for defer, name in ((False, "compiled at import"), (True, "compiled on first use")):
        cpu = statistics.median(r["cpu"] for r in rows[defer])
        wall = statistics.median(r["wall"] for r in rows[defer])
        dynamo = {r["dynamo"] for r in rows[defer]}
        print(f"{name:<30} {cpu:>7.2f} {wall:>7.2f}  {sorted(dynamo)}")
    for key in ("cpu", "wall"):
        before = statistics.median(r[key] for r in rows[False])
        after = statistics.median(r[key] for r in rows[True])
        print(f"ratio deferred / at import, {key}: {after / before:.2f}x")


if __name__ == "__main__":
    main()
