"""`scaling pilot`: real tiny models measured on the local executor, the plan re-priced from
them, a size that cannot fit reported with its fix, unprepared data refused with the recipe."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

from analysis.tables.inference_io import read_inference
from data_prep.testing import tiny_config
from foundation.config import to_dict
from jobs.engine_specs import engine_spec
from models.accounting import checkpoint_bytes
from scaling.costs.disk import num_checkpoints_kept
from scaling.costs.pilot import PILOT_FILE, oom_fixes, probes
from scaling.costs.plan import plan_study
from scaling.driver.environment import load_study_spec
from tests.scaling.conftest import one_size_spec, small_spec
from tests.scaling.helpers import study_runs

PYTHON_SCALING = ("-m", "scaling")


def _write(spec: dict, path: Path) -> Path:
    path.write_text(yaml.safe_dump(spec))
    return path


def _cli(*args: str, cwd: Path):
    import os
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, *PYTHON_SCALING, *args],
        cwd=cwd,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_checkpoints_kept_count_rotation_and_keep_steps(tmp_path, data_dir):
    from jobs.testing import tiny_run_config

    train = tiny_run_config(tmp_path, data_dir).train
    for interval, keep, keep_steps, steps, expected in [
        (0, 2, [], 10, 1),  # only the final save
        (4, 2, [], 12, 2),  # saves 4, 8, 12: the newest 2 stay
        (4, 3, [6], 12, 4),  # 4, 8, 12 rotate (3 kept) + step 6 never rotated
        (5, 1, [10], 10, 2),  # the final save is a keep_step; step 5 is the newest rotating
    ]:
        train.steps, train.checkpoint_interval = steps, interval
        train.keep_checkpoints, train.keep_steps = keep, keep_steps
        assert num_checkpoints_kept(train) == expected, (interval, keep, keep_steps)


@pytest.mark.slow
def test_pilot_measures_each_probe_and_the_plan_is_priced_from_it(
    tmp_path, data_dir, mlflow_server
):
    spec = small_spec(data_dir, tmp_path / "study", mlflow_server)  # 60K on 2 DP ranks
    path = _write(spec, tmp_path / "study.yaml")
    study = load_study_spec(path)
    before = plan_study(study)
    assert not any(r.measured for r in before.rows)

    proc = _cli("pilot", str(path), "--steps", "4", "--warmup", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    pilot = json.loads((study.folder / PILOT_FILE).read_text())
    assert len(pilot["probes"]) == 4  # (30K, 60K) x (linear, nonlinear), one layout each
    for m in pilot["probes"].values():
        assert m["status"] == "ok", m
        assert m["step_time_s"] > 0 and m["checkpoint_write_s"] > 0
        run = next(c.run for c in study.cells if c.size == m["size"])
        assert m["tokens_per_s"] == pytest.approx(run.tokens_per_step / m["step_time_s"])
        assert 0 < m["mfu"] < 1 and m["peak_memory_bytes"] > 50e6
        if m["data_parallel"] == 1:  # one rank writes all: the formula within 5%
            zero_stage = engine_spec(run.engine).zero_stage(run)
            predicted = checkpoint_bytes(run.model, run.parallel, zero_stage, bf16=False)
            assert m["checkpoint_bytes"] == pytest.approx(predicted, rel=0.05)
        inf = m["inference"]  # measured on the same device after the timed steps
        assert inf["status"] == "ok" and inf["device"] == "cpu", inf
        assert all(inf[k] > 0 for k in ("prefill_tok_s", "decode_ms_b1", "decode_ms_b32"))
        assert inf["peak_mem_mb"] > 0 and "CPU" in inf["memory_kind"]
        assert inf["kv_cache_mb"] > 0 and len(inf["rounds"]["decode_ms_b1"]) == 5  # repeats kept
    found = read_inference(study.folder)  # what `scaling analyze` / `run` give the report
    assert all(len(r["rounds"]["prefill_tok_s"]) == 5 and "session" not in r for r in found["rows"])
    assert {(r["size"], r["variant"]) for r in found["rows"]} == {
        (m["size"], m["variant"]) for m in pilot["probes"].values()
    }
    assert not list((study.folder / "pilot").rglob("*.pt"))  # its checkpoints are deleted
    assert study_runs(study) == []  # nothing went to MLflow

    after = plan_study(study)
    for row in after.rows:
        m = next(
            m
            for m in pilot["probes"].values()
            if (m["size"], m["variant"]) == (row.size, row.variant)
        )
        assert row.measured
        assert row.hours == pytest.approx(row.tokens / m["tokens_per_s"] / 3600)
    shown = _cli("plan", str(path), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert "measured for 4 of 4 cells by the pilot" in text and "assumed" not in text

    # a changed micro-batch is another probe: its cells fall back to the assumed price
    spec["batch"]["micro_batch_size"] = 2
    changed = load_study_spec(_write(spec, tmp_path / "changed.yaml"))
    assert not any(r.measured for r in plan_study(changed).rows)


@pytest.mark.slow
def test_a_size_out_of_memory_is_reported_with_its_fix(tmp_path, data_dir, mlflow_server):
    # 400M: two layers of width 4,096, 1.6 GB of fp32 weights, measured as if on a 0.5 GB
    # device (the data-segment limit makes the allocator fail before the machine runs short)
    spec = small_spec(
        data_dir,
        tmp_path / "study",
        mlflow_server,
        sizes=["30K", "400M"],
        variants=["linear"],
        parallel={},
        tokens={"per_size": {"30K": 2048, "400M": 2048}},
    )
    spec["ladder"]["shapes"] = {
        "30K": spec["ladder"]["shapes"]["30K"],
        "400M": {"num_layers": 2, "hidden_size": 4096, "num_attention_heads": 64},
    }
    path = _write(spec, tmp_path / "study.yaml")
    limit = ("--memory-limit-gb", "0.5")
    proc = _cli("pilot", str(path), "--steps", "2", "--warmup", "1", *limit, cwd=tmp_path)
    assert proc.returncode == 3, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = " ".join(proc.stdout.split())
    assert "pilot 400M linear: out of memory" in out
    assert "study.batch.micro_batch_size: 4 -> 2" in out
    assert "study.parallel.400M.tensor_parallel: 1 -> 2" in out
    assert "study.parallel.400M.pipeline_parallel: 1 -> 2" in out
    pilot = json.loads((tmp_path / "study" / PILOT_FILE).read_text())
    status = {m["size"]: m["status"] for m in pilot["probes"].values()}
    assert status == {"30K": "ok", "400M": "oom"}  # the size that fits is still measured
    assert "allocate" in next(m for m in pilot["probes"].values() if m["size"] == "400M")["error"]


def test_oom_fixes_only_offer_layouts_the_shape_divides(tmp_path, data_dir, mlflow_server):
    spec = one_size_spec(data_dir, tmp_path / "study", mlflow_server, steps=4)
    spec["batch"]["micro_batch_size"] = 1
    spec["ladder"]["shapes"]["30K"] = {"num_layers": 3, "hidden_size": 48, "num_attention_heads": 3}
    study = load_study_spec(_write(spec, tmp_path / "s.yaml"), check_environment=False)
    (probe,) = [p for p in probes(study, 1, 2) if p.variant == "linear"]
    assert oom_fixes(probe) == [
        "size 30K: no smaller layout divides its shape; use a larger device"
    ]


def test_pilot_on_unprepared_data_says_how_to_prepare_them(tmp_path, data_dir, mlflow_server):
    prepare = to_dict(tiny_config(tmp_path / "not-yet"))
    spec = small_spec(data_dir, tmp_path / "study", mlflow_server, data={"prepare": prepare})
    path = _write(spec, tmp_path / "study.yaml")
    proc = _cli("pilot", str(path), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = " ".join(proc.stderr.split())
    assert f"study.data: {tmp_path / 'not-yet'} is not prepared yet" in err
    command = f"scaling prepare-data --output {tmp_path / 'not-yet'} --vocab-size 2048"
    assert f"`{command} --validation-fraction 0.1 --max-bytes 2000000`" in err  # non-defaults
    assert not (tmp_path / "study").exists() and not (tmp_path / "not-yet").exists()


def _max_queued_at_once(job_ids: list[str]) -> int:
    """The most of `job_ids` in Slurm's queue at one moment, from sacct's submit and end
    times: at each submission, the jobs submitted by then that had not ended."""
    import subprocess
    import time
    from datetime import datetime

    arrays = sorted({j.split("_")[0] for j in job_ids})
    for _ in range(30):  # slurmdbd records an end a moment after the job left
        out = subprocess.run(
            ["sacct", "-n", "-X", "-P", "-j", ",".join(arrays), "--format=JobID,Submit,End"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
        rows = [line.split("|") for line in out.split()]
        rows = [r for r in rows if r[0] in job_ids]
        if len(rows) == len(job_ids) and all(r[2] not in ("Unknown", "None") for r in rows):
            break
        time.sleep(1)
    times = [(datetime.fromisoformat(s), datetime.fromisoformat(e)) for _, s, e in rows]
    assert len(times) == len(job_ids), out
    return max(sum(s <= t < e for s, e in times) for t, _ in times)


@pytest.mark.slow
@pytest.mark.slurm
def test_pilot_on_slurm_runs_on_the_study_partition_within_the_limits(
    tmp_path, data_dir, mlflow_server, slurm_cluster, monkeypatch
):
    """The pilot runs each probe as a Slurm job with the study's own resources, and (issue 53)
    submits as `scaling run` does, within the cluster's limits: four probes (30K on one task,
    60K on two, x 2 arms) with at most 3 of the user's jobs queued at once
    (`slurm.max_submitted`, under the CI user's MaxSubmitJobs 6): one array per world size,
    never more than 3 probes in the queue (read back from sacct), the fourth submitted once
    one left. Before, the pilot made one sbatch per probe, all at once (and a site's
    MaxSubmitJobs refused the ones past it). Slow (a minute or two on 2 cores): four real
    probes; a held probe exists only when there are more probes than the cap."""
    from tests.scaling.helpers import wait_for_an_empty_queue

    spec = small_spec(data_dir, tmp_path / "study", mlflow_server, executor="slurm")
    spec["slurm"] = {"time_limit_min": 20, "array_parallelism": 2, "max_submitted": 3}
    path = _write(spec, tmp_path / "study.yaml")
    monkeypatch.setenv("SCALING_POLL_S", "1")
    wait_for_an_empty_queue()  # the cap counts every job of this user
    proc = _cli("pilot", str(path), "--steps", "3", "--warmup", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    pilot = json.loads((tmp_path / "study" / PILOT_FILE).read_text())
    assert pilot["executor"] == "slurm"
    assert sorted(m["data_parallel"] for m in pilot["probes"].values()) == [1, 1, 2, 2]
    assert all(m["status"] == "ok" and m["tokens_per_s"] > 0 for m in pilot["probes"].values())
    sbatch = list((tmp_path / "study" / "submitit" / "pilot" / "slurm").glob("*submission.sh"))
    assert sbatch and all("--ntasks-per-node" in f.read_text() for f in sbatch)
    job_ids = [
        line.rsplit(" ", 1)[-1] for line in proc.stdout.splitlines() if ": Slurm job " in line
    ]
    assert len(job_ids) == 4, proc.stdout
    assert _max_queued_at_once(job_ids) <= 3, job_ids  # Slurm's own record of the queue
    arrays = Counter(j.split("_")[0] for j in job_ids)
    assert len(arrays) >= 2 and max(arrays.values()) <= 2, job_ids  # an array per world size
    assert "sbatch refused" not in proc.stdout
    assert "slurm.max_submitted 3" in proc.stdout and "cell(s) wait:" in proc.stdout
