"""The live progress display of `scaling run` and `scaling status --watch` on a terminal.

A person at a terminal gets one bar that fills as cells end, with the counts and the ETA beside
it, redrawn in place; during an LR search a second line spells out the round and when the whole
search ends at worst (`Progress.outlook`). Piped or in CI the plain lines of
`scaling.driver.progress.Reporter` stay (one per change), so logs remain readable and greppable:
callers choose with `sys.stdout.isatty()`.

The bar counts the cells with a result (`Progress.done`), so it never counts back when a resumed
run resubmits the cells an interrupt cancelled; from the first frame it counts the cells the
recorded state held done (`Progress.done_before`).
"""

from __future__ import annotations

from types import TracebackType

from scaling.driver.progress import Progress
from scaling.state.status import StatusRow

__all__ = ["LiveProgress"]


class LiveProgress:
    """A rich progress bar over the study's cells; a `Study.wait` callback.

    Lines printed to stdout while it is shown (e.g. "status unavailable") appear above the bar:
    rich redirects stdout during a live display.
    """

    def __init__(self, progress: Progress, num_cells: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn

        self.progress = progress
        # fits 80 columns: "cells ━━━━━━━━ 12/240 " leaves 59 for `Progress.brief`, e.g.
        # "12 completed, 24 running, 200 queued, 4 failed; ETA 1:02:03" (58)
        self.bar = _bar_with_note()(
            TextColumn("[bold]cells"),
            BarColumn(bar_width=8),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
        )
        # the first frame, before any poll: the cells done when the round started
        self.task = self.bar.add_task(
            "starting", total=num_cells, completed=len(progress.done_before)
        )

    def __enter__(self) -> LiveProgress:
        self.bar.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.bar.stop()

    @property
    def num_done(self) -> int:
        """The count the bar shows now."""
        return int(self.bar.tasks[0].completed)

    def __call__(self, rows: list[StatusRow]) -> None:
        done = len(self.progress.done(rows))
        # the bar already shows "done/all": the text keeps the states and the ETA
        text = self.progress.brief(rows)
        self.bar.note = self.progress.outlook(rows)
        self.bar.update(self.task, completed=done, total=len(rows), description=text)


def _bar_with_note():
    """rich's `Progress` with a line of text under its bars (`note`, none when empty)."""
    from rich.progress import Progress as Bar  # lazy: `scaling --help` stays fast
    from rich.text import Text

    class BarWithNote(Bar):
        note = ""

        def get_renderables(self):
            yield from super().get_renderables()
            if self.note:
                yield Text(self.note)

    return BarWithNote
