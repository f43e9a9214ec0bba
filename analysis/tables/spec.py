"""The few keys of a study spec the analysis reads: where its runs are (``mlflow``, its login
file among them), its name, its output folder and its verdict margin.

Read with ``foundation.config.load_file`` alone: analysis imports nothing from the packages
above it (the spec's full expansion is ``scaling``'s).
"""

from __future__ import annotations

from pathlib import Path

from foundation import contract
from foundation.config import load_file
from foundation.secrets import Credentials, read_credentials_file
from foundation.studypaths import DEFAULT_OUTPUT_DIR, resolve_path, resolve_tracking_uri

# the arm the others are judged by when a study's `verdict.baseline` (or, for a run CSV,
# `--baseline`) names none: the one default, read by the study spec and the CLI alike
DEFAULT_BASELINE = "linear"


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


def spec_margin(spec_path: Path) -> float | None:
    """The spec's ``verdict.margin_pct`` (None when it sets none); read like ``study_source``."""
    section = load_file(spec_path).get("verdict") or {}
    margin = section.get("margin_pct") if isinstance(section, dict) else None
    if margin is not None and not (isinstance(margin, int | float) and margin > 0):
        raise ValueError(
            f"{spec_path}: verdict.margin_pct {margin!r}; give a positive % of the loss, e.g. 0.5"
        )
    return None if margin is None else float(margin)


def spec_verdict(spec_path: Path) -> tuple[str | None, float | None]:
    """The spec's ``verdict.baseline`` and ``verdict.alpha`` (None where it sets none); read
    like ``study_source`` (the full check is ``scaling.spec.study.VerdictSpec.problems``)."""
    section = load_file(spec_path).get("verdict") or {}
    section = section if isinstance(section, dict) else {}
    baseline, alpha = section.get("baseline"), section.get("alpha")
    if baseline is not None and not (isinstance(baseline, str) and baseline):
        raise ValueError(f"{spec_path}: verdict.baseline {baseline!r}; name one of the arms")
    if alpha is not None and not (isinstance(alpha, int | float) and 0 < alpha < 0.5):
        raise ValueError(
            f"{spec_path}: verdict.alpha {alpha!r}; give a level in (0, 0.5), e.g. 0.05"
        )
    return baseline, None if alpha is None else float(alpha)


def spec_login(spec_path: Path) -> Credentials | None:
    """The login in the spec's ``mlflow.credentials_file`` (relative to the spec's folder), or None
    when it names none; ValueError naming the field, the file and the fix (never the password).
    The same file `scaling run` reads (``scaling.spec.credentials``), so `scaling analyze STUDY`
    reaches a server that needs a login without one in the environment."""
    mlflow = load_file(spec_path).get("mlflow")
    path = mlflow.get("credentials_file") if isinstance(mlflow, dict) else None
    if path is None:
        return None
    if not isinstance(path, str) or not path:
        raise ValueError(f"{spec_path}: mlflow.credentials_file {path!r}; name a 0600 file")
    file = Path(path).expanduser()
    file = file if file.is_absolute() else Path(spec_path).absolute().parent / file
    return read_credentials_file(file, f"{spec_path}: mlflow.credentials_file")
