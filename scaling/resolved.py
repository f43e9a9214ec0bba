"""A study resolved once: its checked spec, its vocabulary and its list of cells.

`scaling.loader.load_study` builds one; plan, submit, status, watch and run all take it and
never expand the grid again (a status poll every few seconds reads `cells`, it does not rebuild
them). Functions that are handed a bare `Study` (tests, notebooks) resolve it once on entry
with `resolve`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scaling.grid import Cell, expand_cells
from scaling.study import MlflowSpec, Study

__all__ = ["ResolvedStudy", "resolve"]


@dataclass(frozen=True)
class ResolvedStudy:
    """The spec (typed sections), the model vocabulary and every cell's resolved run config."""

    spec: Study
    vocab_size: int
    cells: tuple[Cell, ...]

    # The spec fields orchestration reads, named here so callers need not reach through.
    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def mlflow(self) -> MlflowSpec:
        return self.spec.mlflow

    @property
    def folder(self) -> Path:
        return self.spec.folder

    @property
    def executor(self) -> str:
        return self.spec.executor

    def cell(self, cell_id: str) -> Cell:
        """The cell named `cell_id` (KeyError if the study has none)."""
        return {c.cell_id: c for c in self.cells}[cell_id]


def resolve(study: Study | ResolvedStudy) -> ResolvedStudy:
    """`study` itself if already resolved, else its vocabulary and cells (built once here)."""
    if isinstance(study, ResolvedStudy):
        return study
    from scaling.loader import check_validation_windows, vocab_size
    from scaling.refine import added_points

    vocab = vocab_size(study)
    check_validation_windows(study)
    # the starting grid, then what LR-search rounds added (its state file in the study folder)
    return ResolvedStudy(study, vocab, tuple(expand_cells(study, vocab, added_points(study))))
