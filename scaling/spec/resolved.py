"""A study resolved once: its checked spec, its vocabulary and its list of cells.

`scaling.spec.loader.resolve` builds one (`load_study_spec` reads a file into one); plan, submit,
status, watch and run all take it and never expand the grid again (a status poll every few
seconds reads `cells`, it does not rebuild them). Nothing past the loader takes a bare `StudySpec`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scaling.spec.grid import Cell
from scaling.spec.study import MlflowSpec, StudySpec

__all__ = ["ResolvedStudy"]


@dataclass(frozen=True)
class ResolvedStudy:
    """The spec (typed sections), the model vocabulary and every cell's resolved run config."""

    spec: StudySpec
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
