"""`scaling pilot STUDY`: the command; the work is `Study.pilot` (`scaling.costs.pilot`)."""

from __future__ import annotations

from typing import Annotated

import typer

from scaling.cli.terminal import (
    StudyArg,
    check_builds,
    check_driver_settings,
    load,
    print_table,
)


def pilot(
    study: StudyArg,
    steps: Annotated[int, typer.Option(help="Timed optimiser steps per probe job.")] = 30,
    warmup: Annotated[
        int, typer.Option(help="Untimed steps first (allocator, kernels, data cache).")
    ] = 5,
    memory_limit_gb: Annotated[
        float | None,
        typer.Option(help="Measure as if each device had only this much memory (GB): what fits?"),
    ] = None,
) -> None:
    """Measure each (size, variant, layout) of a study with one short job, then re-plan.

    One job per distinct (size, variant, parallel layout), on the study's own executor and
    partition: step time, tokens/s, peak memory, MFU, checkpoint write time and size. They are
    kept in the study folder (pilot.json); `scaling plan` then shows measured GPU-hours for the
    cells they cover. A size that runs out of memory is reported with the fix. Exit status 3
    when a probe ran out of memory or failed, 2 for a bad study.
    """
    # lazy: `scaling --help` imports only typer (scaling.cli)
    from foundation.config import ConfigError
    from scaling.costs.pilot import format_pilot  # lazy: `scaling --help` stays fast
    from scaling.costs.pilot_job import OK  # lazy: `scaling --help` stays fast

    check_driver_settings()  # before the study is read: nothing probed yet
    the_study = load(study)
    check_builds(study, the_study)  # a variant that cannot build is one line, not a failed probe
    try:
        limit = None if memory_limit_gb is None else int(memory_limit_gb * 1e9)
        result = the_study.pilot(warmup, steps, memory_limit_bytes=limit)
    except ConfigError as err:
        typer.echo(f"error: {study}: {err}", err=True)
        raise typer.Exit(2) from err
    header, rows, footer = format_pilot(result)
    print_table(f"study {the_study.name}: pilot", header, rows, footer)
    typer.echo(f"`scaling plan {study}` now prices the measured cells from these numbers")
    if any(m["status"] != OK for m in result["probes"].values()):
        raise typer.Exit(3)
