"""Stale results: finished cells whose model code has changed since they trained.

Each run records the digest of the code that built its model when its job starts
(`models.catalog.variants.code_digest`: the `models` package and the variant's own module, tag
`scaling.code_digest`). A finished cell whose digest differs from today's is `stale`: its
result describes a model that no longer exists (a user's variant edited from rank d/2 to d/4
would otherwise be analysed under the new N). `scaling status` shows such cells as `stale`;
`submit` and `run` refuse to go on while any exist, unless told what to do with them:

- `rerun` (`--rerun-stale`): their MLflow runs are deleted (MLflow keeps them restorable until
  `mlflow gc`) with their output dirs, and the cells train again with today's code;
- `accept` (`--accept-stale`): their results are kept and each run is tagged
  `scaling.code_accepted` = today's digest, so the choice is recorded where the result is.

Runs from before digests were recorded have none and count as fresh.

A change while a study runs (the user edits the variant while a round trains) is caught where
the analysis would start: `scaling run` (and `submit`, `status --watch`) stops before each LR
search round, sequential look and the final report (`stop_if_stale`, `StaleCode`), so the old
and the new code are never judged together. The report refuses mixed digests too
(`analysis.tables.digests`).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from foundation import contract
from foundation.config import ConfigError
from models.catalog.variants import code_digest
from scaling.state.mlflow_state import cell_runs, client_for
from scaling.state.run_cache import CellRun

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from scaling.spec.resolved import ResolvedStudy

__all__ = [
    "RERUN",
    "ACCEPT",
    "StaleChoice",
    "code_digests",
    "stale_cells",
    "StaleCode",
    "stop_if_stale",
    "settle_stale",
    "settle_from_flags",
]

RERUN = "rerun"
ACCEPT = "accept"
StaleChoice = Literal["rerun", "accept"] | None


def code_digests(study: ResolvedStudy) -> dict[str, str]:
    """Today's code digest of each query variant the study's cells build."""
    variants = {cell.run.model.query_variant for cell in study.cells}
    return {variant: code_digest(variant) for variant in sorted(variants)}


def stale_cells(study: ResolvedStudy, runs: dict[str, CellRun]) -> list[str]:
    """Ids of the cells whose finished run trained other model code than today's."""
    digests = code_digests(study)
    return [
        cell.cell_id
        for cell in study.cells
        if (run := runs.get(cell.cell_id)) is not None
        and run.status == "FINISHED"
        and run.stale(digests[cell.run.model.query_variant])
    ]


class StaleCode(ConfigError):
    """Finished cells turned stale while the study ran; str: the cells and both fixes."""


def _stale_line(study: ResolvedStudy, stale: list[str]) -> str:
    """What is stale: how many cells, the first few ids and their variants."""
    variant = {cell.cell_id: cell.run.model.query_variant for cell in study.cells}
    variants = sorted({variant[cid] for cid in stale})
    shown = ", ".join(stale[:3]) + (", ..." if len(stale) > 3 else "")
    return (
        f"study {study.name}: {len(stale)} finished cell(s) were trained by model code that "
        f"has changed since ({shown}; variants {', '.join(variants)}: their module or models/)"
    )


def stop_if_stale(
    study: ResolvedStudy, runs: dict[str, CellRun] | None = None, analyzing: bool = False
) -> None:
    """Raise `StaleCode` when finished cells are stale now: the model code changed while the
    study ran. Called before anything judges the runs (an LR search round, a look, the
    report; `analyzing`: `scaling analyze STUDY`, after the study ran), so no analysis mixes
    two versions of the code. `runs`: as just read, else read."""
    stale = stale_cells(study, cell_runs(study) if runs is None else runs)
    if stale:
        when = (
            "; `scaling analyze` judges no stale result"
            if analyzing
            else " while the study ran; stopped before any analysis"
        )
        raise StaleCode(
            _stale_line(study, stale) + f"{when}, nothing judged. Run `scaling run STUDY "
            "--rerun-stale` to train them again, or "
            "`scaling run STUDY --accept-stale` to keep their results (recorded on each run)"
        )


def settle_stale(
    study: ResolvedStudy,
    choice: StaleChoice = None,
    client: MlflowClient | None = None,
    runs: dict[str, CellRun] | None = None,
    say: Callable[[str], None] = lambda _msg: None,
) -> bool:
    """Refuse (ValueError) while stale cells exist and `choice` is None; else rerun or accept
    them (module docstring). True if MLflow changed (then re-read the runs). `runs`: the
    study's runs as just read, else read here through the status cache."""
    runs = cell_runs(study) if runs is None else runs  # a status poll: finished runs cached
    stale = stale_cells(study, runs)
    if not stale:
        return False
    variant = {cell.cell_id: cell.run.model.query_variant for cell in study.cells}
    if choice is None:
        raise ValueError(
            _stale_line(study, stale) + ". Mixing them with runs of today's code would analyse "
            "two models as one. Pass --rerun-stale to train them again, or --accept-stale to "
            "keep their results (recorded on each run); `scaling status` marks them stale"
        )
    client = client or client_for(study)
    digests = code_digests(study)
    output_dir = {cell.cell_id: cell.run.output_dir for cell in study.cells}
    for cid in stale:
        if choice == ACCEPT:
            client.set_tag(runs[cid].run_id, contract.TAG_CODE_ACCEPTED, digests[variant[cid]])
        else:
            client.delete_run(runs[cid].run_id)
            shutil.rmtree(output_dir[cid], ignore_errors=True)
    cell_runs(study, client, refresh=True)  # rewrites the status cache: no deleted run in it
    done = "accepted as they are" if choice == ACCEPT else "to train again"
    say(f"{len(stale)} stale cell(s) {done}")
    return True


def settle_from_flags(
    study: ResolvedStudy, rerun: bool, accept: bool, say: Callable[[str], None]
) -> bool:
    """`settle_stale` for the `--rerun-stale` / `--accept-stale` flags of submit and run."""
    if rerun and accept:
        raise ValueError("--rerun-stale and --accept-stale exclude each other; pick one")
    return settle_stale(study, RERUN if rerun else ACCEPT if accept else None, say=say)
