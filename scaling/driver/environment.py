"""`load_study_spec`: a study read and resolved (`scaling.spec.loader`), then checked against where
it will run: its MLflow store, and its executor's cluster and devices
(`Executor.check_environment`).

Above the executors, so the spec room never asks which executor a study has.
"""

from __future__ import annotations

from pathlib import Path

from foundation.config import ConfigError
from scaling.backends.executors import executor_for
from scaling.spec.loader import check_mlflow, read_study
from scaling.spec.resolved import ResolvedStudy
from scaling.state.store_check import check_store

__all__ = ["load_study_spec", "check_study_environment"]


def load_study_spec(
    path: str | Path, check_environment: bool = True, drop_variants: tuple[str, ...] = ()
) -> ResolvedStudy:
    """Read `path`, validate the spec and every cell, and (by default) the environment.

    Relative paths in it resolve against the folder that holds `path` (`foundation.studypaths`),
    whatever the working directory. Raises ConfigError (a ValueError) naming the file, each
    field and its fix. Writes nothing. `drop_variants`: as `scaling.spec.loader.read_study`.
    """
    study = read_study(path, drop_variants)
    if check_environment:
        try:
            check_study_environment(study)
        except ConfigError as err:
            raise err.prefixed(str(path)) from None
    return study


def check_study_environment(study: ResolvedStudy) -> None:
    """Raise ConfigError unless the study's MLflow store (whole, if SQLite) and (for Slurm) its
    cluster answer.

    Apart from `load_study_spec` so that `scaling plan` can turn the error into a warning: costs are
    worth planning on a laptop before the cluster exists.
    """
    check_mlflow(study.mlflow.tracking_uri)
    check_store(study)  # a SQLite store lost or half-made: its file and the fix
    executor_for(study).check_environment()  # the cluster and the devices it runs on
