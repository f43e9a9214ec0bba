"""`scaling pilot STUDY`: measure before spending, so the plan states costs it has seen.

One short job per distinct (size, variant, parallel layout) of the study, on the study's own
executor, partition and resources (`scaling.costs.pilot_job`): a few untimed warm-up steps, then
`steps` timed ones and one checkpoint. The numbers go to `<study folder>/pilot.json`;
`scaling.costs.plan` then prices every cell whose (size, variant, layout, micro-batch) was measured
at its measured tokens/s instead of the assumed `cost.flops_per_gpu_s`, and says which is which.

A size that ran out of memory is reported with what to change (`oom_fixes`): a smaller
micro-batch, or more tensor/pipeline parallelism where the shape divides.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from submitit.core.utils import pickle_load

from data_prep.manifest import MANIFEST_NAME
from foundation.atomic import write_text
from foundation.config import ConfigError
from foundation.provenance import git_commit
from jobs.config import RunConfig
from models.catalog.variants import variant_module
from scaling.backends.executors import executor_for
from scaling.costs.pilot_job import OK, OOM, PilotJob
from scaling.costs.pilot_queue import submit_probes
from scaling.spec.resolved import ResolvedStudy
from scaling.state.job_errors import failure_reason
from scaling.state.status import submitit_folder
from scaling.warmstart.server import warm_python

__all__ = [
    "PILOT_FILE",
    "Probe",
    "probes",
    "check_data_prepared",
    "run_pilot",
    "load_pilot",
    "probe_key",
    "oom_fixes",
    "format_pilot",
]

PILOT_FILE = "pilot.json"
OOM_POLL_S = 1.0  # how often a running probe's per-rank results are read
VERSION = 1


@dataclass(frozen=True)
class Probe:
    """One pilot job: the first cell of a (size, variant, layout), cut to a short run."""

    key: str  # probe_key(...): what a measurement applies to
    size: str
    variant: str
    config: RunConfig  # train.steps = warmup_steps + steps
    warmup_steps: int
    steps: int
    memory_limit_bytes: int | None = None  # pretend the device has only this much


def probe_key(run: RunConfig, size: str, variant: str) -> str:
    """What a step's cost depends on besides the hardware: the model, its layout and batch."""
    p = run.parallel
    return (
        f"{size}/{variant}/tp{p.tensor_parallel}-pp{p.pipeline_parallel}-dp{p.data_parallel}"
        f"/mb{run.train.micro_batch_size}-seq{run.model.seq_length}-tok{run.tokens_per_step}"
        f"/{run.engine}"
    )


def _probe_config(run: RunConfig, name: str, folder: Path, warmup: int, steps: int) -> RunConfig:
    total = warmup + steps
    train = run.train.__class__(
        **{
            **run.train.__dict__,
            "steps": total,
            "eval_interval": 0,
            "checkpoint_interval": 0,
            "keep_steps": [],
            "dataset_steps": None,
        }
    )
    schedule = run.schedule.__class__(
        **{**run.schedule.__dict__, "warmup_steps": min(run.schedule.warmup_steps, total)}
    )
    tracking = run.tracking.__class__(**{**run.tracking.__dict__, "enabled": False})
    config = run.replace(
        name=name,
        output_dir=str(folder / name),
        train=train,
        schedule=schedule,
        tracking=tracking,
        init_from=None,
    )
    config.validate()
    return config


def probes(study: ResolvedStudy, warmup: int, steps: int) -> list[Probe]:
    """One probe per distinct probe_key among the study's cells, in grid order."""
    folder = study.folder / "pilot"
    seen: dict[str, Probe] = {}
    for cell in study.cells:
        key = probe_key(cell.run, cell.size, cell.variant)
        if key not in seen:
            name = f"pilot-{len(seen):03d}-{cell.size}-{cell.variant}"
            config = _probe_config(cell.run, name, folder, warmup, steps)
            seen[key] = Probe(key, cell.size, cell.variant, config, warmup, steps)
    return list(seen.values())


def check_data_prepared(study: ResolvedStudy) -> None:
    """The pilot trains on the study's data; say how to prepare them if they are not there."""

    path = study.spec.dataset_path
    if (path / MANIFEST_NAME).is_file():
        return
    if study.spec.data.prepare is None:
        how = f"`scaling prepare-data --source SOURCE --output {path}`"
    else:
        how = _prepare_command(study.spec.prepare_config())
    raise ConfigError(
        f"study.data: {path} is not prepared yet ({MANIFEST_NAME} missing), and the pilot "
        f"trains on it; prepare it first with {how} (or `scaling run` the study, which "
        "prepares it before submitting)"
    )


def _prepare_command(prep) -> str:
    """`scaling prepare-data` with the options that differ from its defaults."""
    import dataclasses

    from data_prep.cli import OVERRIDES  # the options the command takes, by field name

    command = f"`scaling prepare-data --output {prep.output_dir}"
    rest = []
    for field in dataclasses.fields(prep):
        value = getattr(prep, field.name)
        if field.name == "output_dir" or value == field.default:
            continue
        if field.name not in OVERRIDES:
            rest.append(field.name)
        elif isinstance(value, bool):
            command += f" --{'' if value else 'no-'}{field.name.replace('_', '-')}"
        else:
            command += f" --{field.name.replace('_', '-')} {value}"
    command += "`"
    if rest:
        command += f" with {', '.join(rest)} set in a --config file"
    return command


def _submit(study: ResolvedStudy, probe: Probe, folder: Path, python: str | None) -> Any:
    """Submit one probe, with the devices the study's own cells would get."""
    world = probe.config.parallel.world_size
    job = PilotJob(probe.config, probe.warmup_steps, probe.steps, probe.memory_limit_bytes)
    return executor_for(study).probe_executor(folder, world, python).submit(job)


def _collect(job: Any, timeout_s: float, own_file: str | None = None) -> dict[str, Any]:
    """One measurement from the job's per-rank results (a crash: status failed, its error
    line and where it arose, in `own_file` if it did: `state.job_errors.failure_reason`).

    Bounded: a job that died without a result (node failure, no accounting) must not hang
    the pilot; it is cancelled and reported failed after `timeout_s`.
    """
    deadline = time.monotonic() + timeout_s
    while not job.done():
        oom = _first_oom(job)
        if oom is not None:  # its peers may wait in a collective for it: end them now
            job.cancel(check=False)
            return {"status": OOM, "error": oom}
        if time.monotonic() > deadline:
            job.cancel(check=False)
            return {"status": "failed", "error": f"no result within {timeout_s:.0f} s; cancelled"}
        time.sleep(OOM_POLL_S)
    oom = _first_oom(job)
    if oom is not None:  # a peer may have failed when the OOM rank left: the OOM is the cause
        return {"status": OOM, "error": oom}
    try:
        ranks = job.results()
    except Exception as err:  # noqa: BLE001 - a failed probe is reported, the others go on
        reason = failure_reason(str(err), own_file)
        return {"status": "failed", "error": reason or type(err).__name__}
    oom = [r for r in ranks if r["status"] == OOM]
    if oom:
        return {"status": OOM, "error": oom[0]["error"]}
    first = next(r for r in ranks if r["rank"] == 0)
    out = {k: v for k, v in first.items() if k != "rank"}
    out["peak_memory_bytes"] = max(r["peak_memory_bytes"] for r in ranks)  # the fullest rank
    return out


def _variant_file(probe: Probe) -> str | None:
    """The tail of the path of the user's variant module ("pkg/mod.py"), where a failed
    probe's error is placed if it arose there; None for a built-in variant."""
    module = variant_module(probe.config.model.query_variant)
    return module.replace(".", "/") + ".py" if module else None


def _first_oom(job: Any) -> str | None:
    """The error of the first rank whose result (already written) is `oom`, else None."""
    for task_id in range(job.num_tasks):
        path = job.task(task_id).paths.result_pickle
        if not path.exists():
            continue
        try:
            outcome, value = pickle_load(path)
        except Exception:  # noqa: BLE001, S112 - still being written: read it next poll
            continue
        if outcome == "success" and isinstance(value, dict) and value.get("status") == OOM:
            return value["error"]
    return None


def run_pilot(
    study: ResolvedStudy,
    warmup: int,
    steps: int,
    say: Callable[[str], None],
    memory_limit_bytes: int | None = None,
) -> dict[str, Any]:
    """Run every probe, write and return `pilot.json`'s content; ConfigError on bad input."""
    from dataclasses import replace

    if warmup < 0 or steps < 1:
        raise ConfigError(f"--warmup {warmup} / --steps {steps}: need warmup >= 0, steps >= 1")
    if memory_limit_bytes is not None and memory_limit_bytes <= 0:
        raise ConfigError("--memory-limit-gb: must be > 0")
    check_data_prepared(study)
    todo = [replace(p, memory_limit_bytes=memory_limit_bytes) for p in probes(study, warmup, steps)]
    folder = submitit_folder(study) / "pilot"
    shutil.rmtree(study.folder / "pilot", ignore_errors=True)  # an interrupted pilot's leftovers
    started = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    executor = executor_for(study)
    timeout_s = executor.probe_timeout_s
    if executor.parallel_probes:  # all at once, each on its own nodes, within Slurm's limits
        jobs = submit_probes(executor, todo, folder, say)
        for probe in todo:
            say(f"pilot {probe.config.name}: {executor.label} job {jobs[probe.key].job_id}")
        for probe in todo:
            result = _collect(jobs[probe.key], timeout_s, _variant_file(probe))
            results[probe.key] = _measurement(probe, result, say)
    else:  # one at a time: probes sharing this machine would time each other
        with warm_python(folder / executor.name) as python:
            for probe in todo:
                job = _submit(study, probe, folder, python)
                result = _collect(job, timeout_s, _variant_file(probe))
                results[probe.key] = _measurement(probe, result, say)
    pilot = {
        "version": VERSION,
        "study": study.name,
        "executor": executor.name,
        "partition": executor.partition,
        "warmup_steps": warmup,
        "steps": steps,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "memory_limit_bytes": memory_limit_bytes,
        "wall_time_s": time.perf_counter() - started,
        "probes": results,
    }
    write_text(study.folder / PILOT_FILE, json.dumps(pilot, indent=1))
    return pilot


def _measurement(probe: Probe, result: dict[str, Any], say: Callable[[str], None]) -> dict:
    p = probe.config.parallel
    result = {
        "size": probe.size,
        "variant": probe.variant,
        "tensor_parallel": p.tensor_parallel,
        "pipeline_parallel": p.pipeline_parallel,
        "data_parallel": p.data_parallel,
        "micro_batch_size": probe.config.train.micro_batch_size,
        **result,
    }
    if result["status"] == OOM:
        result["fixes"] = oom_fixes(probe)
        say(f"pilot {probe.size} {probe.variant}: out of memory; " + "; or ".join(result["fixes"]))
    elif result["status"] == OK:
        say(
            f"pilot {probe.size} {probe.variant}: {1000 * result['step_time_s']:.1f} ms/step, "
            f"{result['tokens_per_s']:.0f} tokens/s"
        )
        inf = result.get("inference") or {}
        if (
            inf.get("status") == OK
        ):  # measured after the timed steps (scaling.inference_cost.inference)
            say(
                f"  inference: prefill {inf['prefill_tok_s']:.0f} tokens/s, decode "
                f"{inf['decode_ms_b1']:.2f} ms/step at batch 1, {inf['decode_ms_b32']:.2f} at 32"
            )
        elif inf:
            say(f"  inference: {inf['status']}: {inf.get('error', '')}")
    else:
        say(f"pilot {probe.size} {probe.variant}: failed: {result['error']}")
    return result


def oom_fixes(probe: Probe) -> list[str]:
    """What to change in the study for a size that ran out of memory, most direct first."""
    run, size = probe.config, probe.size
    p, model = run.parallel, run.model
    fixes = []
    mb = run.train.micro_batch_size
    if mb > 1:
        fixes.append(
            f"study.batch.micro_batch_size: {mb} -> {mb // 2} (activation memory scales with "
            "it; tokens per step stay, as more micro-batches)"
        )
    tp, pp = p.tensor_parallel, p.pipeline_parallel
    if model.num_attention_heads % (2 * tp) == 0:
        fixes.append(
            f"study.parallel.{size}.tensor_parallel: {tp} -> {2 * tp} (splits weights, optimizer "
            f"state and activations over {2 * tp} devices)"
        )
    if model.num_layers % (2 * pp) == 0:
        fixes.append(
            f"study.parallel.{size}.pipeline_parallel: {pp} -> {2 * pp} (each device holds "
            f"{model.num_layers // (2 * pp)} of the {model.num_layers} layers)"
        )
    if not fixes:
        fixes.append(f"size {size}: no smaller layout divides its shape; use a larger device")
    return fixes


def load_pilot(folder: Path) -> dict[str, Any] | None:
    """`pilot.json` of a study folder, or None (none yet, or of an older format)."""
    path = Path(folder) / PILOT_FILE
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    return data if data.get("version") == VERSION else None


def format_pilot(pilot: dict[str, Any]) -> tuple[list[str], list[list[str]], str]:
    """(header, rows, footer) of the measurements, for `scaling pilot`'s table; a probe that
    did not measure shows why in a last column, `reason` (its error line)."""
    header = ["size", "variant", "TP/PP/DP", "micro", "status", "ms/step", "tokens/s", "MFU"]
    header += ["peak memory", "ckpt write", "ckpt size"]
    any_failed = any(m["status"] != OK for m in pilot["probes"].values())
    if any_failed:
        header.append("reason")
    rows = []
    for m in pilot["probes"].values():
        layout = f"{m['tensor_parallel']}/{m['pipeline_parallel']}/{m['data_parallel']}"
        row = [m["size"], m["variant"], layout, str(m["micro_batch_size"]), m["status"]]
        if m["status"] == OK:
            row += [
                f"{1000 * m['step_time_s']:.1f}",
                f"{m['tokens_per_s']:.0f}",
                f"{100 * m['mfu']:.2g}%",
                f"{m['peak_memory_bytes'] / 2**30:.2f} GiB ({m['memory_kind']})",
                f"{m['checkpoint_write_s']:.2f} s",
                f"{m['checkpoint_bytes'] / 2**20:.1f} MiB",
            ]
        else:
            row += [""] * 6
        if any_failed:
            row.append("" if m["status"] == OK else m.get("error", ""))
        rows.append(row)
    footer = (
        f"{pilot['steps']} timed steps after {pilot['warmup_steps']} warm-up, executor "
        f"{pilot['executor']}, {pilot['wall_time_s']:.0f} s; written to {PILOT_FILE}"
    )
    return header, rows, footer
