"""The checks of what a study reads and writes outside itself: its data (a prepared folder or
how to prepare one), its MLflow tracking URI and its evaluation tasks. Run by
`scaling.spec.checks.check_study`, which collects every problem of the spec at once.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from data_prep.config import DataPrepConfig
from foundation.config import ConfigError, Problems, from_dict
from jobs.evaluation.run import task_problems
from scaling.spec.study import StudySpec

__all__ = ["check_data", "check_evaluation", "tracking_uri_ok"]

TRACKING_URI = re.compile(r"^(https?|sqlite|postgresql|mysql|databricks)[:+]")


def check_evaluation(study: StudySpec, p: Problems) -> None:
    """Tasks the harness knows (with their data), on sizes one process can score."""
    for problem in task_problems(study.evaluation.tasks):
        p.add(problem)
    for size in study.sizes:
        par = study.parallel_for(size)
        if par.tensor_parallel > 1 or par.pipeline_parallel > 1:
            p.add(
                f"study.evaluation: size {size} runs with tensor_parallel={par.tensor_parallel}, "
                f"pipeline_parallel={par.pipeline_parallel}; the in-job evaluation scores with "
                "the whole model in one process, so use TP 1 and PP 1 there or drop evaluation"
            )


def tracking_uri_ok(uri: str) -> bool:
    """A known scheme; a server with a host (`http://user:pw@` has none); a SQLite file with
    `sqlite:///` (`sqlite://host/...` is no file)."""
    if not TRACKING_URI.match(uri):
        return False
    if uri.startswith(("http:", "https:")):
        return bool(urlsplit(uri).hostname)
    return not uri.startswith("sqlite:") or uri.startswith("sqlite:///")


def check_data(study: StudySpec, p: Problems) -> None:

    data = study.data
    if not data.path and not data.prepare:
        p.add(
            "study.data: give `path` (a directory made by `scaling prepare-data`) or `prepare` "
            "(DataPrepConfig fields to prepare one)"
        )
    if data.prepare is not None:
        prep = dict(data.prepare)
        if data.path:
            if prep.get("output_dir") not in (None, data.path):
                p.add(
                    f"study.data.prepare.output_dir: {prep['output_dir']!r} differs from "
                    f"study.data.path {data.path!r}; drop one of them"
                )
            prep["output_dir"] = data.path
        if "output_dir" not in prep:
            p.add(
                "study.data.prepare.output_dir: missing; name where the dataset goes (or set "
                "study.data.path)"
            )
        else:
            try:
                from_dict(DataPrepConfig, prep, "study.data.prepare")
                data.prepare = prep
            except ConfigError as err:
                p.extend(err)
    if data.num_val_windows < 1:
        p.add(f"study.data.num_val_windows: {data.num_val_windows} must be >= 1")
    if data.num_select_windows < 0:
        p.add(
            f"study.data.num_select_windows: {data.num_select_windows} must be >= 0; use 0 for "
            "no LR-selection set, or e.g. num_val_windows for one as large as the reported set"
        )
