"""A study's inference figures for its analysis: measured ones, or measured now on this machine.

`study_inference` returns what `analysis.tables.inference_io.read_inference` finds in the study
folder (``pilot.json`` from `scaling pilot`, else ``inference.json``). Where neither has
figures (or ``inference.json`` lacks an arm the study now has, or its per-round figures: a file
from before they were kept) and the study runs on this machine (its executor's
`measures_inference_here`: its device is this one), it measures every (size, variant) once,
in a child process (megatron's process groups and the CPU adapter stay out of the driver), the
arms of one size side by side (their rounds interleaved, `scaling.inference_cost.inference`), and
writes ``inference.json``: per row the median figures, the per-round ones (``rounds``) and
``session`` (the size: rows of one session were measured together, round by round). Other
executors' devices are elsewhere: nothing is measured here, and the report says to run
`scaling pilot`. ``SCALING_INFERENCE_COST=off`` turns the measuring off (the test suite sets
it: its studies are not about inference cost).

``python -m scaling.inference_cost.inference_study REQUEST.json`` is that child.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from analysis.tables.inference_io import INFERENCE_FILE, read_inference
from foundation.atomic import write_text
from scaling.inference_cost.inference import InferenceSettings
from scaling.spec.resolved import ResolvedStudy

__all__ = ["study_inference", "arms", "settings_for", "will_measure"]

TIMEOUT_S = 600.0
# shorter than the pilot's (5 repeats, 32 steps): this runs inside the analysis
SETTINGS = {"max_decode_steps": 16, "repeats": 6, "warmup": 2}
ENV_SWITCH = "SCALING_INFERENCE_COST"  # "off": never measure at analysis time (files still read)


def arms(study: ResolvedStudy) -> dict[str, dict[str, Any]]:
    """``{"size/variant": ModelConfig fields}``: the first cell of each (size, variant)."""
    out: dict[str, dict[str, Any]] = {}
    for cell in study.cells:
        out.setdefault(f"{cell.size}/{cell.variant}", asdict(cell.run.model))
    return out


def settings_for(seq_length: int) -> InferenceSettings:
    """What the child measures with, for models of `seq_length` tokens (`SETTINGS`)."""
    return InferenceSettings.for_seq_length(seq_length, **SETTINGS)


def _figures_found(study: ResolvedStudy) -> dict | None:
    """The figures already in the study folder for every arm it has now, else None."""
    found = read_inference(study.folder)
    wanted = {tuple(key.split("/", 1)) for key in arms(study)}
    rows = (found or {}).get("rows", [])
    have = {(r["size"], r["variant"]) for r in rows if "rounds" in r}  # older files: no rounds
    if found is not None and (found["source"] != INFERENCE_FILE or wanted <= have):
        return found
    return None


def will_measure(study: ResolvedStudy, measures_here: bool) -> bool:
    """True if `study_inference` measures now: no figures in the folder for every arm, the
    switch on, and the study's cells on this machine (`scaling plan` prices it)."""
    if not measures_here or os.environ.get(ENV_SWITCH, "on") == "off":
        return False
    try:
        return _figures_found(study) is None
    except ValueError:  # an unreadable file: `run` stops on it; priced as if measured again
        return True


def study_inference(
    study: ResolvedStudy, say: Callable[[str], None], measures_here: bool
) -> dict | None:
    """The study's figures (see the module docstring), or None with a line saying why.

    `measures_here`: the study's cells run on this machine, so its figures may be measured
    here (`Executor.measures_inference_here` of the study's executor)."""
    found = _figures_found(study)
    if found is not None:
        say(f"inference cost: from {found['source']}")
        return found
    if os.environ.get(ENV_SWITCH, "on") == "off":
        say(f"inference cost: not measured ({ENV_SWITCH}=off)")
        return None
    if not measures_here:
        say("inference cost: not measured (run `scaling pilot` on the study's executor)")
        return None
    study.folder.mkdir(parents=True, exist_ok=True)
    request = study.folder / "inference-request.json"
    payload = {"arms": arms(study), "precision": study.spec.precision, "out": str(study.folder)}
    write_text(request, json.dumps(payload))
    variants = {key.split("/", 1)[1] for key in payload["arms"]}
    sizes = {key.split("/", 1)[0] for key in payload["arms"]}
    say(
        f"inference cost: measuring {len(variants)} arms x {len(sizes)} sizes on this machine "
        f"({SETTINGS['warmup']} + {SETTINGS['repeats']} rounds each, the arms of a size side "
        "by side)"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-m", "scaling.inference_cost.inference_study", str(request)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        say(f"inference cost: not measured (no result within {TIMEOUT_S:.0f} s)")
        return None
    finally:
        request.unlink(missing_ok=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        say(f"inference cost: not measured ({last[:300]})")
        return None
    return read_inference(study.folder)


def _main(request_path: str) -> None:
    import torch

    # lazy: the child alone loads megatron-core
    from models.config import ModelConfig
    from scaling.inference_cost.inference import measure

    request = json.loads(Path(request_path).read_text())
    configs = {key: ModelConfig(**fields) for key, fields in request["arms"].items()}
    bf16 = torch.cuda.is_available() and request["precision"] in ("auto", "bf16")
    seq = min(c.seq_length for c in configs.values())
    settings = settings_for(seq)
    rows, first = [], {}
    for size in dict.fromkeys(key.split("/", 1)[0] for key in configs):  # in the study's order
        # one size's arms side by side, round by round: their ratios pair round r with round r
        figures = measure(
            {k: c for k, c in configs.items() if k.split("/", 1)[0] == size}, settings, bf16=bf16
        )
        for key, f in figures.items():
            first = first or f
            row = {k: f[k] for k in f if k != "device"}
            rows.append({"variant": key.split("/", 1)[1], "size": size, **row, "session": size})
    data = {"device": first["device"], "memory_kind": first["memory_kind"], "rows": rows}
    write_text(Path(request["out"]) / INFERENCE_FILE, json.dumps(data, indent=1))


if __name__ == "__main__":
    _main(sys.argv[1])
