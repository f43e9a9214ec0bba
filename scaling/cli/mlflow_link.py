"""The MLflow UI link `scaling run` prints: the experiment's runs table, not its overview.

MLflow 3.17 opens an experiment on the GenAI overview ("Traces 0") unless the URL picks the
classic workflow: the UI's own switch (`workflowType`) wins over the experiment's kind tag
(`foundation.contract.EXPERIMENT_KIND_TAG`), so the link carries it.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

from foundation import contract
from foundation.studypaths import missing_store

__all__ = ["UI_URL", "runs_table_url", "mlflow_command", "mlflow_ui_hint"]

UI_URL = "http://127.0.0.1:5000"  # where the printed `mlflow ui` command serves a local store


def runs_table_url(base_url: str, experiment_id: str | None) -> str:
    """The runs table of experiment `experiment_id` at the MLflow UI `base_url`; the list of
    experiments when its id is unknown (the store or server did not answer)."""
    base = base_url.rstrip("/")
    if experiment_id is None:
        return f"{base}/#/experiments"
    return f"{base}/#/experiments/{experiment_id}/runs?workflowType=machine_learning"


def _experiment_id(tracking_uri: str, experiment: str) -> str | None:
    """The experiment's id, or None where there is no store yet or MLflow does not answer."""
    if missing_store(tracking_uri) is not None:  # opening it would create an empty store
        return None
    try:
        return contract.experiment_id(contract.make_client(tracking_uri), experiment)
    except Exception:  # noqa: BLE001 - a link is a courtesy: MLflow down must not fail the run
        return None


def mlflow_command() -> str:
    """The `mlflow` of this environment by its absolute path: the printed command works from
    any directory (a relative `.venv/bin/mlflow` only from the repository root)."""
    beside = Path(sys.executable).parent / "mlflow"  # the venv's bin, not resolved past links
    found = str(beside.absolute()) if beside.exists() else shutil.which("mlflow")
    return shlex.quote(found) if found else "mlflow"


def mlflow_ui_hint(tracking_uri: str, experiment: str) -> str:
    """One line: the link to the study's runs table; for a local (SQLite) store, first the
    `mlflow ui` command that serves it."""
    exp_id = _experiment_id(tracking_uri, experiment)
    unknown = "" if exp_id is not None else f" (experiment {experiment!r})"
    if tracking_uri.startswith(("http://", "https://")):
        return f"MLflow UI: open {runs_table_url(tracking_uri, exp_id)}{unknown}"
    return (
        f"MLflow UI: {mlflow_command()} ui --backend-store-uri {shlex.quote(tracking_uri)} "
        "--host 127.0.0.1 "
        f"--port 5000, then open {runs_table_url(UI_URL, exp_id)}{unknown}"
    )
