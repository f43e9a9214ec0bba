"""Sequential seeds (`seeds: {start, max, step}`): judge a look, write it, add its seeds.

A look comes after a round once nothing is queued or running, no failed cell has retries left
and the LR search (if any) has ended: `analysis.stats.looks.sequential.decide_look` judges the
finished runs at the look's nominal level (O'Brien-Fleming-type spending) and says stop, or
which sizes get `step` more seeds. Those seeds run at each arm's chosen LR (the LR frontier's
best on all its seeds so far), numbered on from the highest seed run at that size.

State: `<study folder>/looks.json` (`scaling.state.files.look_state`), written atomically
*before* the
look's seeds are submitted; `scaling.spec.loader.resolve` expands it into cells. A look in the
file is never judged again, so a crash between looks recomputes the same decision from MLflow
(the look is a pure function of the finished runs: the bootstrap's seed is a hash of them) and
a rerun adds no seed twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from foundation import contract
from scaling.lr_search.extend_grid import scan_table, search_over
from scaling.spec.loader import looks_over, resolve
from scaling.spec.resolved import ResolvedStudy
from scaling.state.files.look_state import read_looks, write_looks
from scaling.state.mlflow_state import cell_runs, client_for, find_parent_run
from scaling.state.stale import stop_if_stale
from scaling.state.status import StatusRow
from scaling.study_judgement import design_of, study_judgement

if TYPE_CHECKING:
    from analysis.stats.looks.sequential import Design

__all__ = ["design_of", "look_due", "take_look", "status_lines", "judged_against"]


def judged_against(study: ResolvedStudy, baseline: str | None) -> ResolvedStudy:
    """The study with `baseline` (`scaling run --baseline`) as its `verdict.baseline` for the
    whole run, looks and report alike; refused (ValueError) when it is not one of the study's
    arms, or when a look in `looks.json` was judged against another arm (the looks and the
    report would then read different baselines). None: the study as it is."""
    verdict = study.spec.verdict
    target = verdict.baseline if baseline is None else baseline
    if target != verdict.baseline:
        problems = dataclasses.replace(verdict, baseline=target).problems(study.spec.variants)
        if problems:
            raise ValueError(problems[0].replace("study.verdict.baseline", "--baseline", 1))
    looks = read_looks(study.folder)["looks"] if study.spec.seed_rounds else []
    judged = {look.get("baseline", verdict.baseline) for look in looks}
    if judged - {target}:
        fix = "drop --baseline" if len(judged) > 1 else f"run with --baseline {min(judged)}"
        raise ValueError(
            f"baseline {target}: look(s) {', '.join(str(k['look']) for k in looks)} of this "
            f"study were judged against {', '.join(sorted(judged))}, and the report must read "
            f"the baseline its looks did; {fix}, or judge against {target} in a new study"
        )
    if target == verdict.baseline:
        return study
    spec = dataclasses.replace(study.spec, verdict=dataclasses.replace(verdict, baseline=target))
    return dataclasses.replace(study, spec=spec)


def look_due(study: ResolvedStudy, rows: list[StatusRow]) -> bool:
    """Whether a look is judged now: sequential seeds, not stopped, the LR search over and every
    cell ended (those given up on count as ended, as a round is judged with them)."""
    if looks_over(study.spec) or not search_over(study):
        return False
    return all(r.state in contract.ENDED_STATES for r in rows) and not any(
        r.retryable for r in rows
    )


def take_look(
    study: ResolvedStudy, rows: list[StatusRow], say: Callable[[str], None] = print
) -> ResolvedStudy | None:
    """Judge the next look (`analysis.stats.looks.sequential.decide_look`: its level, decisions, top
    gains and the cells it adds), write it to `looks.json`, log it to the parent run; the study
    with the look's seeds as cells, or None when the look stopped the study."""
    # lazy: scipy and pandas, paid at a look
    from analysis.stats.looks.sequential import decide_look

    data = read_looks(study.folder)
    judgement = study_judgement(study)  # the report's too: one baseline, one design
    design, baseline = judgement.design, judgement.baseline
    assert design is not None, "take_look() is for a study with sequential seeds"
    number = len(data["looks"]) + 1
    runs = stop_if_stale(study, cell_runs(study))  # code changed mid-study: the look not judged
    look = decide_look(scan_table(study, rows, runs), judgement, number)
    round_ = 1 + max((c.round for c in study.cells), default=0)
    entry = look.entry(round_, baseline)
    data = {"design": _design_dict(design), "looks": [*data["looks"], entry]}
    write_looks(study.folder, data)
    _log_to_parent(study, entry)
    say(f"look {number}: {entry['verdict']}; " + ("stop" if look.stop else "more seeds"))
    say(f"  {look.reason}")
    if look.stop:
        return None
    return resolve(study.spec)  # the spec as this run holds it (a --baseline included)


def _design_dict(design: Design) -> dict[str, Any]:
    keys = ("start", "max", "step", "margin_pct", "alpha")
    return {k: getattr(design, k) for k in keys}


def _log_to_parent(study: ResolvedStudy, entry: dict) -> None:
    """The look's verdict on the parent run, with the look as the step: MLflow plots how the
    interval narrowed from look to look. Each metric once per look, however often it is
    judged."""
    client = client_for(study)
    parent = find_parent_run(study, client)
    if parent is None:
        return
    step = int(entry["look"])
    metrics = {
        "look/level": entry["level"],
        "look/info_fraction": entry["info_fraction"],
        "look/num_paired_top": float(entry["num_paired_top"]),
    }
    for variant, gain in entry["top_gain_pct"].items():
        for key, name in (("estimate", ""), ("lo", "/lo"), ("hi", "/hi")):
            if gain[key] is not None:
                metrics[f"look/{variant}/top_gain_pct{name}"] = gain[key]
    for key, value in metrics.items():
        # Exactly once: a look judged again (its `looks.json` deleted or rebuilt, then the study
        # rerun) finds its point on the parent already and adds no second one at its step.
        if not any(m.step == step for m in client.get_metric_history(parent, key)):
            client.log_metric(parent, key, float(value), step=step)
    client.set_tag(parent, "look/verdict", entry["verdict"])
    client.set_tag(parent, "look/reason", entry["reason"][:4900])


def status_lines(study: ResolvedStudy) -> list[str]:
    """`scaling status`: the latest look, its verdict and why the study goes on or stopped."""
    if study.spec.seed_rounds is None:
        return []
    judgement = study_judgement(study)  # the report's: its design, its last look's level
    design, last = judgement.design, judgement.last_look
    assert design is not None, "a study with sequential seeds has a design"
    if last is None:
        return [f"looks: none yet (look 1 after {design.start} seeds; at most {design.num_looks})"]
    state = "stopped" if last["stop"] else "continues"
    return [
        f"look {last['look']} of at most {design.num_looks}: {last['verdict']} "
        f"(level {judgement.level:.3g}); {state}",
        f"look {last['look']}: {last['reason']}",
    ]
