"""The live progress display of `scaling run` and `scaling status --watch` on a terminal.

A person at a terminal gets one bar that fills as cells end, with the counts and the ETA beside
it, redrawn in place. Piped or in CI the plain lines of `scaling.driver.progress.Reporter` stay (one
per change), so logs remain readable and greppable: callers choose with `sys.stdout.isatty()`.
"""

from __future__ import annotations

from types import TracebackType

from scaling.driver.progress import Progress
from scaling.state.status import StatusRow

__all__ = ["LiveProgress"]


class LiveProgress:
    """A rich progress bar over the study's cells; a `wait_study` callback.

    Lines printed to stdout while it is shown (e.g. "status unavailable") appear above the bar:
    rich redirects stdout during a live display.
    """

    def __init__(self, progress: Progress, num_cells: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
        from rich.progress import Progress as Bar

        self.progress = progress
        # fits 80 columns: "cells ━━━━━━━━ 12/240 " leaves 59 for `Progress.brief`, e.g.
        # "12 completed, 24 running, 200 queued, 4 failed; ETA 1:02:03" (58)
        self.bar = Bar(
            TextColumn("[bold]cells"),
            BarColumn(bar_width=8),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
        )
        self.task = self.bar.add_task("starting", total=num_cells)

    def __enter__(self) -> LiveProgress:
        self.bar.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.bar.stop()

    def __call__(self, rows: list[StatusRow]) -> None:
        ended = len(self.progress.ended(rows))
        # the bar already shows "ended/all": the text keeps the states and the ETA
        text = self.progress.brief(rows)
        self.bar.update(self.task, completed=ended, total=len(rows), description=text)
