"""The MLflow link `scaling run` prints opens the runs table, as a person's browser shows it.

Rendered by headless Chromium (Debian's `chromium`) against a real MLflow server. Skipped
without `chromium` on PATH, except where SCALING_REQUIRE_SERVICES=1 (CI), where a missing
browser is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from foundation import contract as C
from scaling.cli.mlflow_link import UI_URL, mlflow_command, mlflow_ui_hint, runs_table_url

RUN_NAME = "link-probe-run"


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("SCALING_REQUIRE_SERVICES") == "1":
            pytest.fail("chromium is not on PATH and SCALING_REQUIRE_SERVICES=1: install it")
        pytest.skip("chromium is not on PATH (Debian: apt-get install chromium)")
    return path


def _page(chromium: str, url: str, profile: Path) -> tuple[str, str]:
    """(title, visible text) of `url` once MLflow's app has rendered, in a fresh profile (the
    UI remembers its workflow switch in the browser's storage)."""
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}"]
    cmd += ["--virtual-time-budget=20000", "--dump-dom", url]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    title = re.search(r"<title>(.*?)</title>", res.stdout, flags=re.S)
    body = re.sub(r"<style.*?</style>|<script.*?</script>", " ", res.stdout, flags=re.S)
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body))
    return (title[1] if title else ""), text


@pytest.fixture
def experiment(mlflow_server) -> str:
    """A fresh experiment made the way a study makes one, holding one ended run."""
    client = C.make_client(mlflow_server)
    exp_id = C.ensure_experiment(client, f"link-{uuid.uuid4().hex[:12]}", mlflow_server)
    run = client.create_run(exp_id, run_name=RUN_NAME)
    client.set_terminated(run.info.run_id)
    return exp_id


def test_printed_link_opens_the_runs_table_in_chromium(mlflow_server, experiment, tmp_path):
    chromium = _chromium()
    name = C.make_client(mlflow_server).get_experiment(experiment).name
    line = mlflow_ui_hint(mlflow_server, name)  # what `scaling run` prints
    url = runs_table_url(mlflow_server, experiment)
    assert line == f"MLflow UI: open {url}"
    assert url.endswith(f"/#/experiments/{experiment}/runs?workflowType=machine_learning")
    title, text = _page(chromium, url, tmp_path / "a")
    assert title.startswith("Runs"), (title, text[-1500:])
    assert RUN_NAME in text and "Run Name" in text, text[-1500:]
    assert "Observability" not in text, "the GenAI overview's sidebar: " + text[-1500:]

    # Why the link names the workflow: the experiment's own address opens the GenAI overview
    # ("Traces") even though the experiment carries the model-training kind tag.
    title, text = _page(chromium, f"{mlflow_server}/#/experiments/{experiment}", tmp_path / "b")
    assert "Traces" in text and RUN_NAME not in text, (
        "the bare experiment address shows the runs table now; `workflowType` may no longer "
        "be needed: " + text[-1500:]
    )


def test_local_store_line_serves_it_then_links_the_runs_table(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    missing = mlflow_ui_hint(uri, "demo")  # no store yet: the hint must not create one
    assert not (tmp_path / "mlflow.db").exists()
    assert missing.endswith(f"then open {UI_URL}/#/experiments (experiment 'demo')")
    exp_id = C.ensure_experiment(C.make_client(uri), "demo", uri)
    line = mlflow_ui_hint(uri, "demo")
    mlflow = mlflow_command()
    assert line == (
        f"MLflow UI: {mlflow} ui --backend-store-uri {uri} --host 127.0.0.1 --port 5000, "
        f"then open {UI_URL}/#/experiments/{exp_id}/runs?workflowType=machine_learning"
    )
    # the command works from any directory: an absolute path to this environment's mlflow
    assert Path(mlflow).is_absolute() and os.access(mlflow, os.X_OK), mlflow
    assert Path(mlflow).parent == Path(sys.executable).parent
