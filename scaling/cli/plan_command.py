"""`scaling plan STUDY`: a study's cells and cost, a dry run that validates everything.

The one verb is `Study.plan` (`scaling.costs.plan`); the lines around its table (wall-clock,
LR search, seeds, power) are the costs room's. Heavy imports happen inside the command so
`scaling --help` stays fast.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from scaling.cli.terminal import (
    StudyArg,
    check_builds,
    fail,
    load,
    print_table,
    say_if_no_store,
)

__all__ = ["plan", "SUMMARY_ABOVE"]

SUMMARY_ABOVE = 100  # a plan of more cells is summed per (size, variant), as `status` does


def plan(
    study: StudyArg,
    check_environment: Annotated[
        bool,
        typer.Option(help="Also check that the MLflow server and Slurm answer (off: offline)."),
    ] = True,
    noise: Annotated[
        str | None,
        typer.Option(
            help="Seed noise for a power table: a number (seed sd as % of loss), a run CSV, or "
            "a finished study (spec path, or name in this study's MLflow experiment). Also "
            "needed for the expected seed cost and the 'cost vs naive' line."
        ),
    ] = None,
    target_gain: Annotated[
        float | None,
        typer.Option(help="With --noise: the paired gain (%) to plan seeds for, e.g. 1.0."),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            help="With --noise: the baseline arm [default: the study's verdict.baseline]."
        ),
    ] = None,
    show_all: Annotated[
        bool,
        typer.Option(
            "--all", help=f"List every cell, also in a grid of more than {SUMMARY_ABOVE} cells."
        ),
    ] = False,
) -> None:
    """Print a study's cells and cost (a dry run: validates everything, submits nothing).

    A grid of more than 100 cells is summed per (size, variant, parallel layout); `--all`
    lists every cell.

    An unreachable MLflow server or Slurm cluster is a warning here, not an error: a person
    plans costs on a laptop before the cluster exists. `submit` and `run` still refuse.
    With --noise, also per size the smallest paired gain the study's seeds detect (80% power,
    the verdict's top-size test) and, with --target-gain, the seeds that gain needs. With
    `seeds: {start, max, step}`, the seed runs' minimum, expected (simulated at --noise and
    --target-gain, and at no gain) and maximum device-hours. With --noise, for a study with an
    LR search or sequential seeds: `cost vs naive`, its expected device-hours against 3 LRs x the
    fixed seeds of equal power at the margin, at every arm and size (not printed without --noise).
    """
    # lazy: `scaling --help` stays fast
    from scaling.costs.lr_search import format_search_cost, search_cost
    from scaling.costs.plan import branch_saving, format_branch_saving, format_plan

    if noise is not None:
        _check_noise_args(noise, target_gain)
    elif target_gain is not None:
        fail("--target-gain needs --noise SOURCE (the seed noise to plan with)")
    from scaling.costs.wall import format_wall, wall_estimate  # lazy: `scaling --help`

    the_study = load(study, check_environment=False)
    spec = the_study.resolved
    say_if_no_store(the_study)
    the_plan = the_study.plan()
    executor = the_study.executor
    device = executor.device_name
    built = check_builds(study, the_study)  # a variant that does not build: its error alone
    if len(the_plan.rows) > SUMMARY_ABOVE and not show_all:
        header, rows, totals = _plan_summary(the_plan, device)
        print_table(f"study {spec.name}: plan, per (size, variant)", header, rows, totals)
    else:
        header, rows, totals = format_plan(the_plan, device)
        print_table(f"study {spec.name}: plan", header, rows, totals)
    _warn_undeclared_flops(spec.spec.variants)
    for line in built:
        typer.echo(line)
    inference_s = None if the_plan.inference is None else the_plan.inference.seconds
    cost_spec = spec.spec.cost
    wall = wall_estimate(spec, the_plan)
    typer.echo(format_wall(wall, cost_spec.startup_s, cost_spec.step_s, inference_s))
    cost = search_cost(spec, the_plan)
    if cost is not None:
        typer.echo(format_search_cost(cost, the_plan, spec, device))
    saving = branch_saving(spec, the_plan)
    if saving is not None:
        typer.echo(format_branch_saving(saving))
    note = executor.plan_note(check_environment)
    if note is not None:
        typer.echo(note)
    baseline = baseline or spec.spec.verdict.baseline
    sd, grid = _read_noise(spec, noise, baseline) if noise is not None else (None, {})
    tune_var = _top_grid_var(spec, grid)
    _print_seed_cost(spec, the_plan, device, sd, noise, target_gain, tune_var)
    if sd is not None:
        _print_naive_cost(spec, the_plan, device, sd, tune_var)
        _print_power(spec, sd, noise, target_gain, grid)
    if check_environment:
        _warn_environment(study, spec)


def _plan_summary(the_plan, device: str) -> tuple[list[str], list[list[str]], str]:
    """The plan summed per (size, variant, processes): cells, their FLOPs and device-hours,
    one cell's time and checkpoint; the totals line as `format_plan` writes it."""
    # lazy: `scaling --help` stays fast
    from scaling.costs.plan import (
        cell_seconds,
        format_bytes,
        format_count,
        format_duration,
        format_plan,
    )

    groups: dict[tuple[str, str, int], list] = {}
    for row in the_plan.rows:
        groups.setdefault((row.size, row.variant, row.gpus), []).append(row)
    rate = (the_plan.flops_per_gpu_s, the_plan.startup_s, the_plan.step_s)
    header = ["size", "variant", "cells", "N", "tokens", "steps", "FLOPs", f"{device}s"]
    header += ["time (longest)", f"{device}-hours", "cost", "ckpt"]
    rows = []
    for (size, variant, gpus), group in groups.items():
        longest = max(cell_seconds(r, *rate) for r in group) / 3600
        steps = sorted({r.steps for r in group})
        measured = {r.measured for r in group}
        rows.append(
            [
                size,
                variant,
                str(len(group)),
                format_count(group[0].num_nonembedding_params),
                format_count(max(r.tokens for r in group)),
                str(steps[0]) if len(steps) == 1 else f"{steps[0]}-{steps[-1]}",
                f"{sum(r.flops for r in group):.2e}",
                str(gpus),
                format_duration(longest),
                f"{sum(r.gpu_hours for r in group):.4g}",
                "measured" if measured == {True} else "assumed" if measured == {False} else "mixed",
                format_bytes(group[0].checkpoint_bytes),
            ]
        )
    totals = format_plan(the_plan, device)[2]  # its rows are strings: cheap beside printing
    totals += f"\n{len(the_plan.rows)} cells in {len(rows)} rows; `scaling plan --all` lists each"
    if the_plan.inference is not None:  # after the cells: `scaling run`'s measurement
        time = format_duration(the_plan.inference.seconds / 3600)
        rows.append(the_plan.inference.table_row(header, device, time))
    return header, rows, totals


def _warn_undeclared_flops(entries: list[str]) -> None:
    """A bring-your-own variant without `flops`: say so before anything is trained."""
    # lazy: `scaling --help` imports only typer (scaling.cli)
    from models.catalog.variants import is_builtin, load_variant
    from scaling.spec.ladder import ARMS  # lazy: `scaling --help` stays fast

    for entry in entries:
        if entry in ARMS or is_builtin(entry) or load_variant(entry).flops is not None:
            continue
        typer.echo(
            f"warning: variant {entry!r} declares no FLOPs per token (QueryVariant.flops): its "
            "compute counts its weights only and the analysis will hold its verdict back; "
            "declare them (docs/variants.md)"
        )


def _check_noise_args(noise: str, target_gain: float | None) -> None:
    """A bad --noise or --target-gain is refused before the study is read."""
    # lazy: scipy and pandas
    from analysis.stats.planning.power import noise_source_kind

    try:
        noise_source_kind(noise)
    except ValueError as err:
        fail(str(err))
    if target_gain is not None and not (math.isfinite(target_gain) and target_gain > 0):
        fail(f"--target-gain {target_gain}: must be a positive gain in % (e.g. 1.0)")


def _top_grid_var(spec, grid: dict[str, float]) -> float:
    """The LR grid's term (%^2) a finished --noise study shows, at its size nearest this
    study's top size (as the seed noise is taken); 0 without one."""
    if not grid:
        return 0.0
    from analysis.stats.planning.power import sd_for_sizes  # lazy: scipy and pandas
    from foundation.contract import size_key  # lazy: `scaling --help` imports only typer

    top = max(spec.spec.sizes, key=size_key)
    return sd_for_sizes(grid, [top])[top][0]


def _read_noise(spec, noise: str, baseline: str) -> tuple[dict[str, float], dict[str, float]]:
    """(seed noise per size, the LR grid's term per size: {} for a number) from --noise."""
    from mlflow.exceptions import MlflowException

    from analysis.api import noise_and_grid_from_source  # lazy: scipy and pandas

    try:
        return noise_and_grid_from_source(
            noise, baseline, (spec.mlflow.tracking_uri, spec.mlflow.experiment)
        )
    except (ValueError, OSError, MlflowException) as err:
        message = str(err)
        fail(message if message.startswith("--noise") else f"--noise {noise}: {message}")


def _print_seed_cost(spec, the_plan, device: str, sd, noise, target_gain, tune_var) -> None:
    """Sequential seeds: their minimum, expected (with --noise) and maximum device-hours."""
    from scaling.costs.seeds import format_seed_cost, seed_cost  # lazy: `scaling --help`

    cost = seed_cost(spec, the_plan)
    if cost is None:
        return
    top = None
    if sd is not None:
        from analysis.stats.planning.power import sd_for_sizes  # lazy: scipy and pandas

        top = sd_for_sizes(sd, [cost.top])[cost.top]
    typer.echo(format_seed_cost(cost, device, top, target_gain, noise, tune_var))


def _print_naive_cost(spec, the_plan, device: str, sd: dict[str, float], tune_var) -> None:
    """The study's expected device-hours against the naive grid's at equal power (one line)."""
    from analysis.stats.planning.power import sd_for_sizes  # lazy: scipy and pandas

    # lazy: `scaling --help` imports only typer (scaling.cli)
    from foundation.contract import size_key
    from scaling.costs.naive import format_naive_cost, naive_cost  # lazy: `scaling --help`

    top = max(spec.spec.sizes, key=size_key)
    cost = naive_cost(spec, the_plan, sd_for_sizes(sd, [top])[top], tune_var)
    if cost is not None:
        typer.echo(format_naive_cost(cost, device))


def _print_power(
    spec, sd: dict[str, float], noise: str, target_gain: float | None, grid: dict[str, float]
) -> None:
    from scaling.costs.power import power_plan  # lazy: `scaling --help` stays fast

    header, rows, note = power_plan(spec, sd, target_gain, grid)
    print_table(f"study {spec.name}: power (noise from {noise})", header, rows, note)


def _warn_environment(path: Path, spec) -> None:
    """Print (to stderr) why `submit` would refuse this study here, if it would."""
    # lazy: `scaling --help` imports only typer (scaling.cli)
    from foundation.config import ConfigError

    # lazy: `scaling --help` stays fast
    from scaling.driver.environment import check_study_environment

    try:
        check_study_environment(spec)
    except ConfigError as err:
        typer.echo(
            f"warning: {path}: {err}. `scaling submit` and `scaling run` need it; the plan above "
            "does not (--no-check-environment skips this check)",
            err=True,
        )
