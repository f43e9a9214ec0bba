"""A study's measured inference figures, read from its folder (no measuring here).

``<study folder>/pilot.json`` (`scaling pilot`: each probe's ``"inference"``) first, else
``<study folder>/inference.json`` (``{"device", "memory_kind", "rows": [...]}``, written by
`scaling run` where the study did not pilot). Returns the ``{"device", "memory_kind", "rows"}``
dict a ``Judgement``'s ``inference`` holds (``analysis.judgement``), or None when neither has
figures.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["INFERENCE_FILE", "PILOT_FILE", "read_inference", "from_pilot"]

INFERENCE_FILE = "inference.json"
PILOT_FILE = "pilot.json"
FIGURES = ("prefill_tok_s", "decode_ms_b1", "decode_ms_b32", "peak_mem_mb")


def from_pilot(pilot: dict) -> dict | None:
    """The figures of every probe whose inference was measured (the first layout per arm)."""
    rows, seen, device, kind = [], set(), None, ""
    for probe in (pilot.get("probes") or {}).values():
        inf = probe.get("inference") or {}
        key = (probe.get("variant"), probe.get("size"))
        if inf.get("status") != "ok" or key in seen:
            continue
        seen.add(key)
        extra = {f: inf[f] for f in ("kv_cache_mb", "rounds") if f in inf}  # newer pilots
        rows.append({"variant": key[0], "size": key[1], **{f: inf[f] for f in FIGURES}, **extra})
        device, kind = device or inf.get("device"), kind or inf.get("memory_kind", "")
    if not rows:
        return None
    return {"device": device or "unknown", "memory_kind": kind, "rows": rows, "source": PILOT_FILE}


def read_inference(study_folder: str | Path) -> dict | None:
    """pilot.json's figures, else inference.json's, else None; ValueError names a bad file."""
    folder = Path(study_folder)
    for name in (PILOT_FILE, INFERENCE_FILE):
        path = folder / name
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise ValueError(
                f"{path}: not readable JSON ({err}); delete it and measure again"
            ) from None
        found = from_pilot(data) if name == PILOT_FILE else {**data, "source": INFERENCE_FILE}
        if found:
            return found
    return None
