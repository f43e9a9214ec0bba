"""`scaling pilot` says why each failed probe failed (issue 36): the job's last error line and
the user's own file and line, in the progress line, in the table and in pilot.json; not the
path of submitit's log that ends its report, nor a bare `failed`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from scaling.costs.pilot import PILOT_FILE
from scaling.state.job_errors import failure_reason
from tests.scaling.conftest import one_size_spec

REPO = Path(__file__).resolve().parents[3]
# it builds (the build check passes it); its backward raises at broken.py line 59
SLIP = "tests.variants.broken:fails_in_backward"
CAUSE = "RuntimeError: the gradient of this query is not written yet"
WHERE = f"(at {REPO / 'tests' / 'variants' / 'broken.py'}:59)"


@pytest.mark.slow  # ~35 s on 2 busy cores: a warm process imports megatron, one real probe
def test_a_failed_probe_shows_its_error_line_and_the_users_file(tmp_path, data_dir):
    spec = one_size_spec(data_dir, tmp_path / "study", f"sqlite:///{tmp_path / 'mlflow.db'}", 4)
    spec["variants"] = [SLIP]
    spec["verdict"] = {"baseline": SLIP}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    proc = subprocess.run(
        [sys.executable, "-m", "scaling", "pilot", str(path), "--steps", "1", "--warmup", "0"],
        cwd=tmp_path,
        # the user's variant module importable in the probe's job, as docs/variants.md says
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), "COLUMNS": "400"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out[-4000:]  # a probe failed
    (line,) = [x for x in out.splitlines() if x.startswith("pilot 30K backslip: failed: ")]
    assert line.startswith(f"pilot 30K backslip: failed: {CAUSE}") and line.endswith(WHERE), line
    reason = line.removeprefix("pilot 30K backslip: failed: ")
    table = out[out.index("study tiny-study: pilot") :]
    assert "reason" in table and reason in table, table
    assert "_log.out" not in out  # submitit's log paths are not the reason
    pilot = json.loads((tmp_path / "study" / PILOT_FILE).read_text())
    status = {m["variant"]: (m["status"], m.get("error")) for m in pilot["probes"].values()}
    assert status == {"backslip": ("failed", reason)}, status


# submitit's report of a failed job, as `job.results()` raises it (its layout in submitit 1.5)
REPORT = """Job (task=0) failed during processing with trace:
----------------------
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/submitit/core/submission.py", line 55, in process_job
    result = delayed.result()
  File "/repo/models/build.py", line 80, in build_gpt
    model = GPTModel(config)
  File "/home/me/ideas/my_query.py", line 12, in __init__
    self.w = make(config)
  File "/home/me/ideas/helpers.py", line 3, in make
    return torch.empty(-1)
  File "/repo/models/_cpu_adapter.py", line 58, in __torch_function__
    return func(*args, **kwargs)
  File "/usr/lib/python3.11/site-packages/torch/_ops.py", line 9, in __call__
RuntimeError: Trying to create tensor with negative dimension -1

----------------------
You can check full logs with 'job.stderr(0)' and 'job.stdout(0)'or at paths:
  - /s/submitit/pilot/local/1234_0_log.err
  - /s/submitit/pilot/local/1234_0_log.out
"""
CAUSE2 = "RuntimeError: Trying to create tensor with negative dimension -1"


def test_the_reason_is_the_error_line_where_the_users_file_raised_it():
    assert failure_reason(REPORT, "ideas/my_query.py") == (
        f"{CAUSE2} (at /home/me/ideas/my_query.py:12)"
    )
    # a built-in variant: the deepest frame outside Python and its packages
    assert failure_reason(REPORT) == f"{CAUSE2} (at /repo/models/_cpu_adapter.py:58)"
    # a job that left no result: the first line of what submitit says
    assert failure_reason("Job 12 has not produced any output (state: NODE_FAIL)\n") == (
        "Job 12 has not produced any output (state: NODE_FAIL)"
    )
