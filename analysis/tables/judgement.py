"""The `Judgement`: everything that decides a verdict, one frozen value handed down whole.

It sits in the lowest room so that every function that decides or reports (``analysis.stats``,
``analysis.report``) takes it whole and reads what it needs, instead of a baseline string, a
margin, a level and a draw count threaded one by one (and defaulted again at each door). It is
built in one place, ``analysis.judgement.table_judgement`` (a study's through
``scaling.study_judgement``); that module's docstring says what each field fixes.

``data_seed`` is here too: a sequential judgement's bootstrap is seeded from its runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_DETECT_GAIN_PCT = 0.5  # the gain (%) the report's power table is worked out for
DEFAULT_RESAMPLES = 1000  # parametric bootstrap draws

# who judges: the study itself (`run`, a look, `analyze STUDY` reproducing the run), a user's
# re-analysis of a study (another baseline, margin, seed or draws), or a run table of no study
STUDY, REANALYSIS, TABLE = "study", "reanalysis", "table"
By = Literal["study", "reanalysis", "table"]


@dataclasses.dataclass(frozen=True)
class Judgement:
    """How a run table is judged (``analysis.judgement``). Build it with
    ``analysis.judgement.table_judgement`` (or ``scaling.study_judgement.study_judgement`` for a
    study), not by hand: the builder fills every field, so none has a default here."""

    baseline: str  # as the user wrote it: "linear" or "linear,linear_qknorm"
    baselines: tuple[str, ...]  # the same, parsed once
    margin_pct: float  # the equivalence margin (`none` vs `undetected`), % of the loss
    alpha: float  # the family-wise level (a sequential design's, over all its looks)
    level: float  # the level this judgement tests at: alpha, or the last look's nominal level
    seed: int  # the bootstrap's seed (a sequential study's comes from its runs: `bootstrap_seed`)
    num_resamples: int  # parametric bootstrap draws
    detect_gain_pct: float  # the gain (%) the report's power table is worked out for
    # sequential seeds: the design its looks follow (`analysis.stats.looks.sequential.Design`)
    design: Any = None
    looks: dict[str, Any] | None = None  # sequential seeds: looks.json, at least one look
    lr_search: dict[str, Any] | None = None  # the LR search's summary, for the report
    stability: bool = False  # lr.search.find_edge: each arm's largest stable LR is reported
    downstream_tasks: tuple[str, ...] | None = None  # None: every task the runs logged
    inference: dict[str, Any] | None = None  # measured inference figures ({"device", "rows"})
    by: By = TABLE
    changed: tuple[str, ...] = ()  # a re-analysis: the settings the user changed ("--margin")

    @property
    def primary(self) -> str:
        """The first baseline arm: the one inference ratios and stability are measured to."""
        return self.baselines[0]

    @property
    def sequential(self) -> bool:
        return self.looks is not None

    @property
    def last_look(self) -> dict[str, Any] | None:
        return self.looks["looks"][-1] if self.looks is not None else None

    def bootstrap_seed(self, table: pd.DataFrame) -> int:
        """The seed the bootstrap draws with: a sequential study's is a hash of its finished
        runs (``data_seed``: the same runs, the same draws, so a look judged again after a
        crash decides the same), else ``seed``."""
        return data_seed(table) if self.sequential else self.seed

    def own_verdict(self) -> bool:
        """Whether this is the study's own judgement (it may be written into the study's folder
        and logged to its parent run)."""
        return self.by == STUDY

    def at_look(self, level: float) -> Judgement:
        """This judgement at one look of its sequential design: the design's margin, every
        claim (and equivalence) tested at the look's nominal ``level``
        (``analysis.stats.looks.sequential.decide_look``)."""
        assert self.design is not None, "at_look() is for a judgement with a sequential design"
        return dataclasses.replace(
            self, margin_pct=self.design.margin_pct, alpha=self.design.alpha, level=level
        )

    def at_level(self, level: float) -> Judgement:
        """This judgement testing every claim at ``level``, all else as it is: a resolve path's
        look, judged at its increment of the alpha spent (``scaling.driver.resolve``), and the
        study's verdict after the path, at its last look's."""
        return dataclasses.replace(self, level=level)

    def reanalysed(
        self,
        changed: tuple[str, ...],
        *,
        margin_pct: float | None = None,
        seed: int | None = None,
        num_resamples: int | None = None,
        detect_gain_pct: float | None = None,
    ) -> Judgement:
        """The same judgement with the user's own settings (None: this one's stands): a
        re-analysis, not the study's verdict, that names what the user ``changed``
        (``("--margin 0.3",)``) in the terminal, the report and verdict.json."""
        settings = {
            "margin_pct": margin_pct,
            "seed": seed,
            "num_resamples": num_resamples,
            "detect_gain_pct": detect_gain_pct,
        }
        given = {k: v for k, v in settings.items() if v is not None}
        return dataclasses.replace(self, **given, by=REANALYSIS, changed=tuple(changed))


def data_seed(table: pd.DataFrame) -> int:
    """The bootstrap's seed, derived from the finished runs: the same table, the same draws."""
    cols = [c for c in ("variant", "size", "tokens", "lr", "seed", "status", "final_val_loss")]
    canon = table[cols].sort_values(cols[:5]).to_csv(index=False, float_format="%.17g")
    return int.from_bytes(hashlib.sha256(canon.encode()).digest()[:4], "little")
