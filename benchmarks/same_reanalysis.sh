#!/usr/bin/env bash
# The demo's verdict.json, report.md and report.html from one code tree, for a byte comparison
# before and after a refactor (with benchmarks/same_verdicts.py for synthetic studies):
#
#   bash benchmarks/same_reanalysis.sh /tmp/base /tmp/base/runs/demo /tmp/h4/demo-pre
#   bash benchmarks/same_reanalysis.sh "$PWD"    /tmp/base/runs/demo /tmp/h4/demo-post
#   cmp /tmp/h4/demo-pre/report.md /tmp/h4/demo-post/report.md   # and the other two
#
# TREE: the code tree (its root on PYTHONPATH); RUNS: a finished demo's runs/demo, copied, never
# written; OUT: where the three files and the terminal's lines go. The copy sits at the same
# path every time (/tmp/same-reanalysis), so a path the report names is the same in both.
# A tree whose models/ differs from the one the runs trained with refuses them as stale (by
# design): give both trees the runs' models/ (`git archive COMMIT | tar -x`, then copy it in).
set -euo pipefail
tree=$(cd "$1" && pwd)
runs=$2
out=$3
here=$(cd "$(dirname "$0")/.." && pwd)
scratch=/tmp/same-reanalysis
rm -rf "$scratch"
mkdir -p "$scratch/studies" "$scratch/runs" "$out"
cp -a "$runs" "$scratch/runs/demo"
rm -rf "$scratch/runs/demo/analysis"  # written again below
cp "$here/studies/demo.yaml" "$scratch/studies/demo.yaml"  # output_dir: ../runs/demo
cd "$scratch"
PYTHONPATH="$tree" OMP_NUM_THREADS=1 "$here/.venv/bin/python" -m scaling analyze studies/demo.yaml \
    > "$out/terminal.txt" 2>&1
for name in verdict.json report.md report.html; do
    cp "$(find "$scratch/runs/demo" -name "$name" -newer "$scratch/studies/demo.yaml" | head -1)" \
        "$out/$name"
done
