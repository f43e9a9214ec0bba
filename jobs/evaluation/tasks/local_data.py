"""The data of the local task `scaling_local`: the JSONL file beside this module, as a
`datasets.DatasetDict` with one `test` split (read from disk, never from the hub)."""

from __future__ import annotations

import json
from pathlib import Path

DATA_FILE = Path(__file__).with_name("scaling_local.jsonl")


def load(**_: object):
    """lm-eval's `custom_dataset` hook; it passes the task metadata, which is not needed."""
    import datasets  # lazy: only when the harness loads the task

    rows = [json.loads(line) for line in DATA_FILE.read_text().splitlines() if line.strip()]
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})
