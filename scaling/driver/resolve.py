"""`scaling run STUDY --resolve --budget HOURS`: the resolve loop carried out by the study itself.

`analysis.stats.resolve.loop.resolve_loop` judges, prices and buys with the study's own:

- judge: the study's own analysis (`analysis.stats.analyze.analyse` with the study's judgement,
  the LR chosen again in every bootstrap draw) at the look's level, read into each variant's
  deciding interval (`analysis.stats.resolve.evidence.from_verdict`);
- cost: one cell's device-hours from the plan (the pilot's measured tokens/s where there are
  some: `scaling.costs.plan.plan_cost`, what verdict.json's `resolve` prices by too);
- buy: real cells of the study. The extension's cells go into `resolve.json`
  (`scaling.state.files.resolve_state`) before anything is submitted; `scaling.spec.loader`
  expands them into cells like the LR search's rounds, so `status`, `plan` and `analyze` see
  them; they are trained by the round driver (`StudyRun.drive`), which skips finished cells.

The plan (budget, looks, alpha = `verdict.alpha`, kinds: the flags, else the study file's
`resolve:`) is declared in `resolve.json` before the first extension; another later is refused.
The loop is a pure function of the study's finished runs (its bootstrap seed is the study's):
a rerun after an interrupt decides the same extensions and trains nothing twice.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from foundation import contract
from scaling.backends.executors import executor_for
from scaling.driver.round_driver import StudyRun, View
from scaling.driver.run import analyze_study
from scaling.driver.submission import fail_parent_run, prepare_study_data, study_parent_run_id
from scaling.spec.grid import cell_id, longer_id
from scaling.spec.ladder import resolve_arm
from scaling.spec.loader import resolve
from scaling.spec.next_size import grow_problem, study_grow
from scaling.spec.resolve_spec import NO_BUDGET, RESOLVE_KINDS, with_study_file
from scaling.spec.resolved import ResolvedStudy
from scaling.state.files.regular import read_json
from scaling.state.files.resolve_state import read_resolve, write_resolve
from scaling.state.files.search_state import read_state
from scaling.state.mlflow_state import cell_runs
from scaling.study_judgement import study_judgement

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ResolveRefused", "Resolved", "check_resolve", "resolve_study", "after_path"]

DEFAULT_MAX_LOOKS = 4
NO_TOKENS = (
    "--options tokens: longer training needs a tokens axis in the study (`tokens.branches`), "
    "which --resolve does not add; leave tokens out of --options"
)
UNRESOLVED = ("undetected", "inconclusive")


class ResolveRefused(ValueError):
    """A resolve that cannot start: one line naming the flag or field and the fix."""


@dataclasses.dataclass(frozen=True)
class Resolved:
    """What `resolve_study` did: its path, verdict and report folder, the study as it grew."""

    path: dict
    verdict: dict | None
    report_dir: Path | None
    study: ResolvedStudy
    rows: list


def parse_budget(text: str | float | None, flag: str = "--budget") -> float:  # the CLI's
    """A positive finite number of device-hours, else ResolveRefused naming `flag`."""
    try:
        value = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ResolveRefused(
            f"{flag} {text}: give the device-hours the resolve may spend, a positive number "
            "(e.g. --budget 0.5)"
        )
    return value


def declared(study: ResolvedStudy, budget: float, max_looks: int | None, kinds) -> dict:
    """The plan `resolve.json` declares: the budget, the looks, the study's alpha, the kinds."""
    if max_looks is not None and (not isinstance(max_looks, int) or max_looks < 1):
        raise ResolveRefused(f"--max-looks {max_looks}: give at least 1 extension (default 4)")
    rounds = study.spec.seed_rounds
    return {
        "budget": float(budget),
        "max_looks": DEFAULT_MAX_LOOKS if max_looks is None else int(max_looks),
        "alpha": float(study.spec.verdict.alpha),
        "kinds": list(kinds or default_kinds(study)),
        "max_seeds": None if rounds is None else int(rounds.max),
        "start_seeds": 3,
    }


def default_kinds(study: ResolvedStudy) -> tuple[str, ...]:
    """Every kind --resolve can buy that the study can take (one more size where its rules
    derive one: `scaling.spec.next_size`; longer training where it has a tokens axis)."""
    can = {"size": grow_problem(study.spec) is None, "tokens": bool(study.spec.tokens.branches)}
    return tuple(k for k in RESOLVE_KINDS if can.get(k, True))


def check_resolve(
    study: ResolvedStudy, budget: float | None, max_looks: int | None = None, kinds=None
) -> dict:
    """The declared plan, or ResolveRefused before anything is prepared, submitted or written:
    a kind the study cannot take, sequential seeds (they spend the study's alpha on their own
    looks), a plan that differs from the one `resolve.json` declared, a study whose path has
    ended or whose verdict is resolved already, a study with too few sizes for any verdict but
    `inconclusive`."""
    from analysis.stats.resolve.options import KINDS  # lazy: numpy, once a resolve is asked

    budget, max_looks, kinds = with_study_file(study.spec.resolve, budget, max_looks, kinds)
    if budget is None:
        raise ResolveRefused(NO_BUDGET)
    for kind in kinds or ():
        if kind not in KINDS:
            raise ResolveRefused(f"--options {kind}: not an option; one of {', '.join(KINDS)}")
        if kind == "tokens" and not study.spec.tokens.branches:
            raise ResolveRefused(NO_TOKENS)
        if kind == "size" and (why := grow_problem(study.spec)) is not None:
            raise ResolveRefused(f"--options size: {why}")
    if study.spec.seed_rounds is not None:
        raise ResolveRefused(
            "--resolve: this study has sequential seeds (`seeds: {start, max, step}`), whose "
            "looks spend verdict.alpha already; give it a fixed `seeds` list to resolve it"
        )
    plan = declared(study, budget, max_looks, kinds)
    state = read_resolve(study.folder)
    if state is not None:
        if max_looks is None:
            plan["max_looks"] = state["plan"]["max_looks"]
        if kinds is None:
            plan["kinds"] = state["plan"]["kinds"]
        if state["plan"] != plan:
            was = ", ".join(f"{k} {v}" for k, v in state["plan"].items() if plan.get(k) != v)
            raise ResolveRefused(
                f"--budget/--max-looks/--options: {study.folder / 'resolve.json'} declared "
                f"{was} before its first extension; give the same, or resolve in a new study"
            )
        path = state.get("path")
        if path:
            raise ResolveRefused(
                f"--resolve: the resolve path of {study.name} has ended ({path['stopped']}: "
                f"{looks_words(path['words'])}); its verdict is in the report"
            )
        return _enough_sizes(study, plan)
    report = contract.analysis_folder(study.name, study.spec.output_dir)
    verdict = read_json(report / "verdict.json", "a verdict")
    if isinstance(verdict, dict) and verdict.get("variants"):
        words = {v["variant"]: v["verdict"] for v in verdict["variants"]}
        if not any(w in UNRESOLVED for w in words.values()):
            raise ResolveRefused(
                f"--resolve: {study.name} is finished and resolved ({looks_words(words)}); nothing "
                "to buy"
            )
    return _enough_sizes(study, plan)


def _enough_sizes(study: ResolvedStudy, plan: dict) -> dict:
    """`plan`, or ResolveRefused: too few sizes for any verdict but `inconclusive`."""
    from analysis.stats.rules.verdict import MIN_SIZES  # lazy: as above

    if len(sizes := list(study.spec.sizes)) < MIN_SIZES:
        raise ResolveRefused(
            f"--resolve: sizes has {len(sizes)} ({', '.join(map(str, sizes))}); the verdict "
            f"judges a trend on >= {MIN_SIZES} sizes per arm, so it stays inconclusive whatever "
            "seeds or LRs --resolve adds; add sizes (sizes, ladder.shapes, lr.grid) first"
        )
    return plan


def looks_words(words: dict[str, str]) -> str:
    return ", ".join(f"{v} {w}" for v, w in words.items()) or "no variant read"


class _Path:
    """The study's side of one resolve path: its state file, its cells, its judge and buy."""

    def __init__(self, study: ResolvedStudy, plan: dict, say, view: View | None) -> None:
        self.study, self.plan, self.say, self.view = study, plan, say, view
        state = read_resolve(study.folder) or {"plan": plan, "looks": [], "path": None}
        self.state = state
        self.judgement = study_judgement(study)
        self.looks_judged = 0
        self.last: dict = {}  # the last look's evidence, per variant
        self.spec_variant = {resolve_arm(v)[0]: v for v in study.spec.variants}

    def write(self) -> None:
        write_resolve(self.study.folder, self.state)

    def look(self, k: int) -> dict:
        looks = self.state["looks"]
        while len(looks) <= k:
            looks.append({"look": len(looks)})
        return looks[k]

    # the loop's callables

    def judge(self, table: pd.DataFrame, level: float) -> dict:
        from analysis.stats.analyze import analyse  # lazy: scipy and pandas
        from analysis.stats.resolve.evidence import from_verdict  # lazy: as above

        k = self.looks_judged
        j = self.judgement.at_level(level)
        verdict = analyse(table, j, j.bootstrap_seed(table)).verdict
        read = from_verdict(verdict, table)
        words = {v["variant"]: v["verdict"] for v in verdict["variants"]}
        entry = self.look(k)
        entry.update(level=level, words=words)
        entry["estimate_pct"] = {v: e.estimate_pct for v, e in read.items()}
        entry["half_width_pct"] = {v: e.half_width_pct for v, e in read.items()}
        self.write()
        self.looks_judged, self.last = k + 1, read
        bought = entry.get("bought")
        what = f"; after {bought['kind']} ({bought['num_runs']} runs)" if bought else ""
        self.say(f"resolve look {k} (level {level:.3g}): {looks_words(words)}{what}")
        return read

    def buy(self, cells: Sequence[dict]) -> pd.DataFrame:
        k = self.looks_judged  # the look this extension is judged at
        entry = self.look(k)
        mine = [self._cell(c) for c in cells]
        mine = [c for c in mine if c["cell_id"] not in self._earlier_ids(k)]
        if "cells" in entry:
            if [c["cell_id"] for c in entry["cells"]] != [c["cell_id"] for c in mine]:
                raise ValueError(
                    f"{self.study.folder / 'resolve.json'}: extension {k} bought "
                    f"{len(entry['cells'])} other cells than the runs decide now; restore the "
                    "file, or resolve in a new study"
                )
        else:
            known = {c.cell_id for c in self.study.cells}
            mine = [c for c in mine if c["cell_id"] not in known]  # a cell it has already
            round_ = 1 + max((c.round for c in self.study.cells), default=0)
            entry.update(round=round_, cells=mine, bought=self._option(cells, k))
            self.write()  # before anything is submitted: a rerun finds them
        b = entry["bought"]
        self.say(f"resolve extension {k}: {b['kind']}, {len(cells)} runs, "
                 f"{b['cost']:.3g} device-hours: {b['why']}")  # fmt: skip
        self.study = resolve(self.study.spec)
        self.train()
        ids = {c["cell_id"] for c in entry["cells"]}
        ids |= {self._cell(c)["cell_id"] for c in cells}
        return self.rows_of(ids)

    # the study's cells

    def _cell(self, c: dict) -> dict:
        lr = float(f"{float(c['lr']):.3g}")  # as its cell id names it
        seed, cid = int(c["seed"]), cell_id(c["size"], c["variant"], int(c["seed"]), lr)
        longer = longer_id(self.study.spec, c["size"], cid, c["budget"]) if "budget" in c else {}
        return {
            "cell_id": cid, "variant": c["variant"],
            "spec_variant": self.spec_variant.get(c["variant"], c["variant"]),
            "size": c["size"], "seed": seed, "lr": lr, **longer,
        }  # fmt: skip

    def _earlier_ids(self, k: int) -> set[str]:
        return {c["cell_id"] for look in self.state["looks"][:k] for c in look.get("cells", [])}

    def _option(self, cells: Sequence[dict], k: int) -> dict:
        """The option the loop chose (priced again on the last look's evidence, as it was)."""
        from analysis.stats.resolve.options import price  # lazy: numpy
        from scaling.costs.plan import plan_cost  # lazy: models' accounting

        plan = self.loop_plan()
        level = plan.levels()[k]
        for ev in (e for e in self.last.values() if e.word in UNRESOLVED):
            for o in price(ev, level, plan_cost(self.study), max_seeds=plan.max_seeds,
                           start_seeds=plan.start_seeds, kinds=plan.kinds,
                           grow=study_grow(self.study.spec)):  # fmt: skip
                if list(o.cells) == list(cells):
                    return o.as_dict()
        return {"kind": "?", "num_runs": len(cells), "cost": 0.0, "why": "", "p_resolve": None}

    def loop_plan(self):
        from analysis.stats.resolve.loop import Plan  # lazy: numpy and pandas

        p = self.plan
        return Plan(
            budget=p["budget"], max_looks=p["max_looks"], alpha=p["alpha"],
            max_seeds=p["max_seeds"], start_seeds=p["start_seeds"], kinds=tuple(p["kinds"]),
        )  # fmt: skip

    def train(self) -> list:
        """Every due cell trained (the bought ones; finished cells are skipped)."""
        driver = StudyRun(self.study, executor_for(self.study), say=self.say, view=self.view)
        rows = driver.drive(wait=True)
        driver.finish(rows, end_parent=False)
        self.study = driver.study
        self.driver, self.rows = driver, rows
        return rows

    def table(self) -> pd.DataFrame:
        from analysis.tables.mlflow_io import load_study_runs  # lazy: pandas

        uri = self.study.mlflow.tracking_uri
        return load_study_runs(uri, self.study.mlflow.experiment, self.study.name)[0]

    def rows_of(self, ids: set[str]) -> pd.DataFrame:
        runs = cell_runs(self.study)
        run_ids = {runs[c].run_id for c in ids if c in runs}
        table = self.table()
        return table[table["run_id"].isin(run_ids)].reset_index(drop=True)

    def start_table(self) -> pd.DataFrame:
        """The study's runs without any an extension bought (look 0's table, as first read)."""
        bought = self._earlier_ids(len(self.state["looks"]))
        runs = cell_runs(self.study)
        run_ids = {runs[c].run_id for c in bought if c in runs}
        table = self.table()
        return table[~table["run_id"].isin(run_ids)].reset_index(drop=True)


def resolve_study(
    study: ResolvedStudy,
    plan: dict,
    say: Callable[[str], None] = print,
    view: View | None = None,
    out_dir: Path | None = None,
) -> Resolved:
    """Run the study's cells, then the resolve loop on them (`plan`: `check_resolve`'s), then
    the study's verdict at the last look's level, with the path in verdict.json
    (`resolve_path`) and the report. Safe to rerun: it continues the same path."""
    from analysis.stats.resolve.loop import resolve_loop  # lazy: numpy and pandas
    from scaling.costs.plan import plan_cost  # lazy: models' accounting

    prepare_study_data(study)
    here = _Path(study, plan, say, view)
    if read_resolve(study.folder) is None:
        here.write()  # the plan, declared before the first extension
    try:
        here.train()  # the study's own cells, and any an interrupted extension left
        here.judgement = study_judgement(here.study)
        path = resolve_loop(here.start_table(), here.judge, plan_cost(here.study), here.buy,
                            here.loop_plan(), study_grow(study.spec)).as_dict()  # fmt: skip
        if not path["words"]:  # no variant's interval could be read: nothing was priced
            path["stopped"] = "no option"
        for row, entry in zip(path["looks"], here.state["looks"], strict=False):
            if "bought" in entry:
                row["bought"] = entry["bought"]
            row["round"] = entry.get("round")
            row["cells"] = [c["cell_id"] for c in entry.get("cells", [])]
        here.state["path"] = path
        here.write()
        say(ended_line(path))
        verdict, report_dir = _analyze(here.study, path, say)
        here.driver.end_parent(here.rows)
    except BaseException as err:
        fail_parent_run(here.study, err)
        raise
    return Resolved(path, verdict, report_dir, here.study, here.rows)


def _analyze(study: ResolvedStudy, path: dict, say) -> tuple[dict, Path]:
    """The study's verdict at its last look's level, with the path (verdict.json's
    `resolve_path`), written where `scaling run` writes it."""
    # lazy: the inference measurement runs only when the study is analysed
    from scaling.inference_cost.inference_study import study_inference

    measures_here = executor_for(study).measures_inference_here
    search = read_state(study.folder) if study.spec.lr.search is not None else None
    own = study_judgement(study, study_inference(study, say, measures_here), search)
    judgement = own.at_level(path["looks"][-1]["level"])
    return analyze_study(
        study, None, study_parent_run_id(study), search, say, judgement=judgement,
        extra={"resolve_path": path},
    )  # fmt: skip


def after_path(study: ResolvedStudy, judgement) -> tuple[Any, dict | None]:
    """`scaling analyze STUDY` after an ended resolve path: the judgement at its last look's
    level and verdict.json's `resolve_path`, as the resolve's own analysis wrote them; else the
    judgement as it is and no extra keys."""
    state = read_resolve(study.folder)
    path = (state or {}).get("path")
    if not path:
        return judgement, None
    level = path["looks"][-1]["level"]
    return judgement.at_level(level), {"resolve_path": path}


def ended_line(path: dict[str, Any]) -> str:
    """How a resolve path ended, in one line: `run --resolve` says it, `status` repeats it."""
    spent = f"{path['spent']:.3g} of {path['budget']:g} device-hours"
    return (f"resolve: {path['stopped']} after {len(path['looks']) - 1} extension(s), {spent}; "
            f"{looks_words(path['words'])}")  # fmt: skip
