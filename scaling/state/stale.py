"""Stale results: finished cells whose model code has changed since they trained.

Each run records the digest of the code that built its model when its job starts
(`models.catalog.variants.code_digest`: the `models` package and every module of the user's code
the variant imports, transitively, tag `scaling.code_digest`; its parts, file by file, in
`scaling.code_files`, so status names the file that changed). A finished cell whose digest
differs from today's is `stale`: its
result describes a model that no longer exists (a user's variant edited from rank d/2 to d/4
would otherwise be analysed under the new N). `scaling status` shows such cells as `stale`;
`submit` and `run` refuse to go on while any exist, unless told what to do with them:

- `rerun` (`--rerun-stale`): their MLflow runs are deleted (MLflow keeps them restorable until
  `mlflow gc`) with their output dirs, and the cells train again with today's code;
- `accept` (`--accept-stale`): their results are kept and each run is tagged
  `scaling.code_accepted` = today's digest, so the choice is recorded where the result is.

Runs from before digests were recorded have none and count as fresh.

Undo: an accepted result whose own digest is today's again (the edit it was accepted for was
undone) is fresh by its own code; its acceptance of the other digest is dropped
(`drop_undone_accepts`, at every settle and before every analysis), so it is judged as the code
on disk, with the cells trained since, never as the undone edit.

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
from models.catalog.code_parts import changed_code, digest_of_parts
from models.catalog.variants import code_parts
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
    "today_code",
    "changed_files",
    "drop_undone_accepts",
    "stale_cells",
    "StaleCode",
    "stop_if_stale",
    "settle_stale",
    "settle_from_flags",
]

RERUN = "rerun"
ACCEPT = "accept"
StaleChoice = Literal["rerun", "accept"] | None


def today_code(study: ResolvedStudy) -> dict[str, dict[str, str]]:
    """Today's code parts (`models.catalog.variants.code_parts`) of each query variant the
    study's cells build."""
    variants = {cell.run.model.query_variant for cell in study.cells}
    return {variant: code_parts(variant) for variant in sorted(variants)}


def code_digests(study: ResolvedStudy, parts: dict[str, dict[str, str]] | None = None) -> dict:
    """Today's code digest of each query variant the study's cells build (from `parts`, as
    `today_code` returned them, when given)."""
    parts = today_code(study) if parts is None else parts
    return {variant: digest_of_parts(p) for variant, p in parts.items()}


def changed_files(run: CellRun, today: dict[str, str]) -> list[str]:
    """The files that changed since `run` trained (`today`: its variant's `today_code`), as
    paths; [] when the run did not record its parts (then only the digest says so)."""
    return changed_code(run.code_files, today)


def stale_cells(
    study: ResolvedStudy, runs: dict[str, CellRun], digests: dict[str, str] | None = None
) -> list[str]:
    """Ids of the cells whose finished run trained other model code than today's (`digests`,
    as `code_digests` returned them, when given)."""
    digests = code_digests(study) if digests is None else digests
    return [
        cell.cell_id
        for cell in study.cells
        if (run := runs.get(cell.cell_id)) is not None
        and run.status == "FINISHED"
        and run.stale(digests[cell.run.model.query_variant])
    ]


class StaleCode(ConfigError):
    """Finished cells turned stale while the study ran; str: the cells and both fixes."""


def _stale_line(
    study: ResolvedStudy,
    stale: list[str],
    runs: dict[str, CellRun],
    parts: dict[str, dict[str, str]],
) -> str:
    """What is stale: how many cells, the first few ids, their variants and the changed files."""
    variant = {cell.cell_id: cell.run.model.query_variant for cell in study.cells}
    variants = sorted({variant[cid] for cid in stale})
    shown = ", ".join(stale[:3]) + (", ..." if len(stale) > 3 else "")
    files = sorted({f for cid in stale for f in changed_files(runs[cid], parts[variant[cid]])})
    what = "their module, a module it imports or models/"
    what = f"changed: {', '.join(files)}" if files else what
    return (
        f"study {study.name}: {len(stale)} finished cell(s) were trained by model code that "
        f"has changed since ({shown}; variants {', '.join(variants)}; {what})"
    )


def drop_undone_accepts(
    study: ResolvedStudy,
    runs: dict[str, CellRun],
    client: MlflowClient | None = None,
    digests: dict[str, str] | None = None,
) -> list[str]:
    """Undo after `--accept-stale`: a finished run trained by today's code (its own digest is
    today's again: the edit it was accepted for was undone) loses its acceptance of the other
    digest, so its result stands for the code on disk, as the runs trained since do, and the
    analysis sees one digest, not the undone edit's beside today's. Ids of the cells changed
    (then re-read the runs)."""
    digests = code_digests(study) if digests is None else digests
    undone = [
        cell.cell_id
        for cell in study.cells
        if (run := runs.get(cell.cell_id)) is not None
        and run.status == "FINISHED"
        and run.code_accepted is not None
        and run.code_digest == (today := digests[cell.run.model.query_variant])
        and run.code_accepted != today
    ]
    if undone:
        client = client or client_for(study)
        for cid in undone:
            client.delete_tag(runs[cid].run_id, contract.TAG_CODE_ACCEPTED)
    return undone


def stop_if_stale(
    study: ResolvedStudy, runs: dict[str, CellRun] | None = None, analyzing: bool = False
) -> dict[str, CellRun]:
    """Raise `StaleCode` when finished cells are stale now: the model code changed while the
    study ran. Called before anything judges the runs (an LR search round, a look, the
    report; `analyzing`: `scaling analyze STUDY`, after the study ran), so no analysis mixes
    two versions of the code. `runs`: as just read, else read. An acceptance undone since
    (`drop_undone_accepts`) is dropped first. Returns the runs, as re-read when a tag
    changed."""
    runs = cell_runs(study) if runs is None else runs
    parts = today_code(study)
    if drop_undone_accepts(study, runs, digests=code_digests(study, parts)):
        runs = cell_runs(study, refresh=True)
    stale = stale_cells(study, runs, code_digests(study, parts))
    if stale:
        when = (
            "; `scaling analyze` judges no stale result"
            if analyzing
            else " while the study ran; stopped before any analysis"
        )
        raise StaleCode(
            _stale_line(study, stale, runs, parts) + f"{when}, nothing judged. Run `scaling run "
            "STUDY --rerun-stale` to train them again, or "
            "`scaling run STUDY --accept-stale` to keep their results (recorded on each run)"
        )
    return runs


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
    parts = today_code(study)
    digests = code_digests(study, parts)
    undone = drop_undone_accepts(study, runs, client, digests)
    if undone:
        runs = cell_runs(study, client, refresh=True)
        say(
            f"{len(undone)} accepted cell(s) trained by the code on disk again (the edit they "
            "were accepted for is undone): their acceptance dropped"
        )
    stale = stale_cells(study, runs, digests)
    if not stale:
        return bool(undone)
    variant = {cell.cell_id: cell.run.model.query_variant for cell in study.cells}
    if choice is None:
        raise ValueError(
            _stale_line(study, stale, runs, parts)
            + ". Mixing them with runs of today's code would analyse "
            "two models as one. Pass --rerun-stale to train them again, or --accept-stale to "
            "keep their results (recorded on each run); `scaling status` marks them stale"
        )
    client = client or client_for(study)
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
