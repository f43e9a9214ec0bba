"""How a study names its verdict's settings, in the one place both packages read: the default
baseline and margin, and the one parser of a baseline string (``"A,B"``: per size the stronger
of arms A and B). Light (no numpy): `scaling.spec` checks a study with them at load time.

``study_source``: where a study's runs are, for `scaling plan --noise STUDY`
(``analysis.stats.planning.power``), read with ``foundation.config.load_file`` alone: analysis
imports nothing from the packages above it. Everything else of a study (`scaling analyze STUDY`
included) is read once by ``scaling.spec.loader`` and judged through ``analysis.judgement``.
"""

from __future__ import annotations

from pathlib import Path

from foundation import contract
from foundation.config import load_file
from foundation.studypaths import DEFAULT_OUTPUT_DIR, resolve_path, resolve_tracking_uri

# the arm the others are judged by when a study's `verdict.baseline` (or, for a run CSV,
# `--baseline`) names none: the one default, read by the study spec and the CLI alike
DEFAULT_BASELINE = "linear"
# verdict.margin_pct: gains within +- this % of the loss count as none (`scaling.spec.study`);
# the one default (`tests/test_one_default.py`)
DEFAULT_MARGIN_PCT = 0.5


def parse_baselines(baseline: str) -> list[str]:
    """``"linear"`` or ``"linear,linear_qknorm"`` (per size, the strongest of them): the arm
    names, in order; the first is the one inference cost and stability are measured against.
    Called only by the `Judgement`'s builder (``analysis.judgement.table_judgement``); the rest
    read ``Judgement.baselines`` (tests/test_one_default.py)."""
    names = [b.strip() for b in str(baseline).split(",") if b.strip()]
    if not names:
        raise ValueError("--baseline is empty; name the arm the others are judged by")
    return names


def study_source(spec_path: Path) -> tuple[str, str, str, Path]:
    """(tracking_uri, experiment, study name, analysis folder) from a study spec.

    Reads only its ``name``, ``mlflow`` and ``output_dir`` keys (`foundation.config.load_file`):
    analysis imports nothing from the packages above it. The folder is `scaling run`'s: relative
    paths resolve against the spec's folder, as `scaling.spec.loader` resolves them
    (`foundation.studypaths`).
    """
    spec = load_file(spec_path)  # ConfigError (a ValueError) naming the file
    name = spec.get("name")
    mlflow = spec.get("mlflow")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{spec_path}: `name` (the study name) is missing; add `name: my_study`")
    if not isinstance(mlflow, dict):
        raise ValueError(
            f"{spec_path}: the `mlflow` section is missing; add `mlflow: {{experiment: ..., "
            "tracking_uri: ...}}`"
        )
    missing = [k for k in ("experiment", "tracking_uri") if not isinstance(mlflow.get(k), str)]
    if missing:
        raise ValueError(
            f"{spec_path}: mlflow.{missing[0]} is missing; set it to the study's MLflow "
            f"{'experiment name' if missing[0] == 'experiment' else 'server URI'}"
        )
    base = Path(spec_path).absolute().parent
    output_dir = resolve_path(spec.get("output_dir") or DEFAULT_OUTPUT_DIR.format(name=name), base)
    folder = contract.analysis_folder(name, str(output_dir))
    uri = resolve_tracking_uri(mlflow["tracking_uri"], base)
    return uri, mlflow["experiment"], name, folder
