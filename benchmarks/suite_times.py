"""Where the suite's time goes: the per-test file `SCALING_TEST_TIMES=FILE` writes
(tests/suite_times.py), summed by test and by module, CPU first (docs/testing.md).

    SCALING_TEST_TIMES=/tmp/times.tsv CI=true bash .ci/run
    .venv/bin/python benchmarks/suite_times.py /tmp/times.tsv [--top 40]
"""

from __future__ import annotations

import argparse
from collections import defaultdict


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    tests = []
    for line in open(args.file, encoding="utf-8"):
        nodeid, wall, cpu = line.rstrip("\n").split("\t")
        tests.append((nodeid, float(wall), float(cpu)))
    modules: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for nodeid, wall, cpu in tests:
        m = modules[nodeid.split("::", 1)[0]]
        m[0], m[1], m[2] = m[0] + wall, m[1] + cpu, m[2] + 1
    total_wall, total_cpu = sum(t[1] for t in tests), sum(t[2] for t in tests)
    print(f"{len(tests)} tests: {total_wall:.0f} s of test wall, {total_cpu:.0f} CPU-s")
    print(f"\nthe {args.top} modules with the most CPU")
    print("| module | tests | CPU-s | % of CPU | wall s |")
    print("|---|---|---|---|---|")
    ranked = sorted(modules.items(), key=lambda kv: -kv[1][1])
    for name, (wall, cpu, n) in ranked[: args.top]:
        print(f"| {name} | {n} | {cpu:.0f} | {100 * cpu / total_cpu:.1f} | {wall:.0f} |")
    print(f"\nthe {args.top} tests with the most CPU")
    print("| test | CPU-s | wall s |")
    print("|---|---|---|")
    for nodeid, wall, cpu in sorted(tests, key=lambda t: -t[2])[: args.top]:
        print(f"| {nodeid} | {cpu:.0f} | {wall:.0f} |")


if __name__ == "__main__":
    main()
