"""A finished study's cells as `sweep.py` lines, so `summarize.py` tabulates a `scaling run`.

    python benchmarks/noise/from_study.py STUDY_FOLDER --tag TAG >> results.jsonl

Reads each cell's `run_config.yaml` and `result.json` from STUDY_FOLDER/cells (what the cells
themselves wrote; no MLflow needed). CPU seconds are not recorded by a study: the training-loop
wall seconds stand in for both.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml


def line(cell: Path, tag: str) -> dict | None:
    result_file = cell / "result.json"
    if not result_file.is_file():
        return None
    result = json.loads(result_file.read_text())
    cfg = yaml.safe_load((cell / "run_config.yaml").read_text())
    model, train, opt = cfg["model"], cfg["train"], cfg["optimizer"]
    schedule = cfg["schedule"]
    return {
        "tag": tag,
        "shape": f"{model['num_layers']},{model['hidden_size']},{model['num_attention_heads']}",
        "variant": model["query_variant"],
        "seed": cfg["seed"],
        "init_seed": cfg["seed"],
        "data_seed": cfg["data"]["seed"],
        "lr": opt["lr"],
        "steps": train["steps"],
        "batch_tokens": train["global_batch_tokens"],
        "seq": model["seq_length"],
        "warmup": schedule["warmup_steps"],
        "schedule": schedule["kind"],
        "val_windows": cfg["data"]["num_val_windows"],
        "position": model["position_embedding"],
        "status": result["status"],
        "loss": result["final_val_loss"],
        "select_loss": result.get("final_select_loss"),
        "cpu_s": round(result["loop_time_s"], 2),
        "wall_s": round(result["loop_time_s"], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study_folder", type=Path)
    parser.add_argument("--tag", required=True)
    args = parser.parse_args()
    for cell in sorted((args.study_folder / "cells").iterdir()):
        found = line(cell, args.tag)
        if found is not None:
            print(json.dumps(found))


if __name__ == "__main__":
    main()
