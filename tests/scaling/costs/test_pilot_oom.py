"""A pilot probe under pipeline parallelism where one rank runs out of memory: the OOM is
reported (not a crash, not a 10-minute wait) as soon as that rank's result lands, and the job
is ended so that its peers, waiting in a collective for the OOM rank, do not hang on."""

from __future__ import annotations

import time

import pytest

from foundation.config import from_dict
from jobs.config import RunConfig
from jobs.testing import tiny_run_dict
from scaling.costs.pilot import _collect
from scaling.costs.pilot_job import ENV_OOM_AT, OOM, PilotJob
from scaling.warmstart.server import warm_python

REPORT_WITHIN_S = 60


@pytest.mark.slow  # a two-task job importing megatron: ~25 s on 2 busy cores
def test_an_oom_on_one_pipeline_rank_is_reported_within_60_s(tmp_path, data_dir, monkeypatch):
    import submitit

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setenv(ENV_OOM_AT, "1:1")  # the last stage, after one good step
    cfg = tiny_run_dict(tmp_path, data_dir, name="pilot-pp", parallel={"pipeline_parallel": 2})
    config = from_dict(RunConfig, cfg, where="run")
    with warm_python(tmp_path / "warm") as python:
        executor = submitit.LocalExecutor(folder=tmp_path / "submitit", python=python)
        executor.update_parameters(timeout_min=10, tasks_per_node=2)
        job = executor.submit(PilotJob(config, warmup_steps=1, steps=2))
        try:
            result = _collect(job, timeout_s=300)
            reported = time.time()
            oom_written = job.task(1).paths.result_pickle.stat().st_mtime
            deadline = time.monotonic() + 30
            while not job.done() and time.monotonic() < deadline:
                time.sleep(0.2)
            ended = job.done()
        finally:
            if not job.done():
                job.cancel(check=False)
    assert result["status"] == OOM, result
    assert result["error"].startswith("rank 1: OutOfMemoryError"), result
    assert reported - oom_written < REPORT_WITHIN_S
    assert ended, "the peers of the OOM rank were left running"
