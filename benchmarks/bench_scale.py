"""Every command of a study at 10 → 10,000 cells: plan, status (warm), one driver poll, the
driver's memory, `scaling analyze`, and the study in the MLflow UI.

    source /tmp/svc/env          # the suite's MLflow server (PostgreSQL) and Slurm
    .venv/bin/python benchmarks/bench_scale.py                 # 10, 100, 1,000 cells
    .venv/bin/python benchmarks/bench_scale.py 10 1000 10000
    .venv/bin/python benchmarks/bench_scale.py --existing /tmp/x/grid-10000.yaml   # made before

Each study is studies/demo.yaml (LR search off) with as many seeds as make N cells, on Slurm,
tracked in the server `SCALING_TEST_MLFLOW_URI` names. Its cells are "instant": each gets its
MLflow run as `submit` makes it (`ensure_cell_run`, under the study's parent run), then the
final loss, N, D and C, its outcome and FINISHED, as a job that trains nothing would leave
them, and a Slurm job record whose job has left the queue (so a poll asks squeue and MLflow
all it would ask of a finished study). Nothing is trained; no Slurm job is submitted (a
10,000-job submission is a cluster's, not this machine's). Making 10,008 runs takes 15-20
minutes; `--existing` measures a study made before again (its YAML, kept where it was made).

Measured per N: `scaling plan --no-check-environment` in-process (warm imports), `status`'s
poll cold (a full search, `--refresh`) and warm, one driver poll (`RoundWatcher.status`: the
squeue calls it made), the peak RSS of a driver process that loads the study and polls (and
its last poll), `scaling analyze` in its own process, and the MLflow UI's runs table in
headless Chromium (`open_in_browser`: seconds until the parent's row shows, the "N matching
runs" it states then, "Load more" clicks and seconds until every run is loaded, seconds until
the expanded parent shows its children, and the rows the grid then holds). Targets (issue
53): plan <= 5 s, status <= 5 s warm, a poll <= 2 s, the driver <= 1 GB, analyze <= 60 s at
10,000 cells.

Measured on 2 cores shared with other sessions (load average 9 at the start, 4 at the end),
MLflow 3.17 on PostgreSQL, December 2026 (the 10,008-cell study made before, `--existing`):

    cells plan s runs s status cold warm  poll squeue drv MB drv poll analyze s ui s matching
       24   0.16    2.2        0.06 0.04  0.04      1    188     0.04       5.4  2.0       25
       96   0.11    4.1        0.11 0.03  0.03      1    190     0.02       5.4  1.8       97
     1008   0.16   39.0        1.27 0.05  0.04      1    205     0.04       5.8  1.3      101
    10008   0.93      -        7.91 0.13  0.14      1    325     0.12      13.2  1.3      101

    cells kids s Load more  all s ui rows
       24    0.1         0    0.0      25
       96    0.1         0    0.0      97
     1008    0.5        10    2.9    1009
    10008    0.5       100   32.3   10009

From 1,008 to 10,008 cells: plan x5.8, warm status x2.6, a poll x3.5 (one squeue each), the
driver's RSS +120 MB, analyze x2.3, the UI's first view the same (it loads 100 runs). The
UI's "N matching runs" counts the runs loaded so far, 100 a "Load more" click
(docs/cluster.md, "Large studies").

`scaling analyze` of the 10,008 runs, before (74d4996) and after this script's issue-53 work,
back to back on the same machine (load average 2-3; `/tmp`'s breakdown script wraps the
functions): 38.9 s and 37.8 s before (the run search 11.1 / 10.6 s through the client's
protobuf pages, the curves 22.3 / 21.8 s at one `get_metric_history` per run and key, the fits
and report 3.4 / 3.2 s, 17.5 s of CPU), 13.8 s and 13.4 s after (the REST search 8.2 / 8.1 s,
the curves 0.25 s in 68 `get-history-bulk` requests, the fits 3.0 / 2.9 s, 5.7-6.1 s of CPU):
x2.8. Earlier, at load average 9-13: 51.8 s and 56.7 s before, 21.9 s and 25.9 s after. A
driver's poll of 10,008 finished cells: 0.21-0.29 s before, 0.11-0.13 s after (the status
cache is no longer parsed again while unchanged; that parse was 1.2 s of a 3.2 s poll under
load average 20).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))  # cdp.py

THREADS = 8  # MLflow calls in flight while the runs are made


def study_file(folder: Path, num_cells: int, uri: str) -> Path:
    spec = yaml.safe_load((REPO / "studies" / "demo.yaml").read_text())
    del spec["lr"]["search"]
    per_seed = len(spec["sizes"]) * len(spec["variants"]) * 3  # 3 LRs per (size, variant)
    spec["seeds"] = list(range(max(1, round(num_cells / per_seed))))
    spec["executor"] = "slurm"
    spec["output_dir"] = str(folder / "runs" / f"grid-{num_cells}")
    spec["mlflow"] = {"experiment": f"bench-scale-{uuid.uuid4().hex[:8]}", "tracking_uri": uri}
    spec["data"]["prepare"]["output_dir"] = str(REPO / "data" / "stdlib-demo-bytes")
    path = folder / f"grid-{num_cells}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def timed(fn, *args):
    start = time.perf_counter()
    value = fn(*args)
    return time.perf_counter() - start, value


def time_plan(path: Path) -> float:
    from typer.testing import CliRunner

    from scaling.cli import app

    seconds, result = timed(CliRunner().invoke, app, ["plan", "--no-check-environment", str(path)])
    assert result.exit_code == 0, result.output[-2000:]
    return seconds


def _loss(n: float, d: float, variant: str, seed: int, lr: float) -> float:
    """A Chinchilla-like final loss (FACTS.md's fit), 1% lower for the nonlinear arm, a
    U-shaped LR penalty around 0.01 and 0.3% seed noise: what `analyze` fits."""
    import math
    import random

    base = 1.82 + 482 / n**0.348 + 2085 / d**0.366
    base *= 0.99 if "nonlinear" in variant else 1.0
    base *= 1 + 0.02 * math.log(lr / 0.01) ** 2
    return base * (1 + 0.003 * random.Random(hash((n, variant, seed, lr))).gauss(0, 1))


def make_instant_runs(study) -> float:
    """Each cell's run as `submit` makes it, then as an instant job ends it; seconds taken."""
    from foundation import contract
    from scaling.state.files.job_records import JobRecord, write_records
    from scaling.state.mlflow_state import client_for, ensure_cell_run, ensure_parent_run

    start = time.perf_counter()
    client = client_for(study)
    parent = ensure_parent_run(study, client)
    exp_id = contract.experiment_id(client, study.mlflow.experiment)
    from mlflow.entities import Metric, RunTag

    from models.accounting import num_nonembedding_params, num_params

    sized: dict[tuple[str, str], tuple[int, int]] = {}

    def counts(cell) -> tuple[int, int]:
        key = (cell.size, cell.variant)
        if key not in sized:
            sized[key] = (num_nonembedding_params(cell.run.model), num_params(cell.run.model))
        return sized[key]

    def one(index_cell):
        index, cell = index_cell
        cell = cell.with_parent(parent)
        run_id = ensure_cell_run(client, exp_id, parent, cell, None)
        now = int(time.time() * 1000)
        loss = _loss(counts(cell)[0], cell.tokens, cell.variant, cell.seed, cell.lr)
        metrics = [
            Metric(contract.FINAL_VAL_LOSS, loss, now, cell.run.train.steps),
            Metric(contract.FINAL_SELECT_LOSS, loss, now, cell.run.train.steps),
            Metric(contract.TOKENS, float(cell.tokens), now, 0),
            Metric(contract.FLOPS, float(cell.flops), now, 0),
            Metric(contract.NUM_NONEMBEDDING_PARAMS, float(counts(cell)[0]), now, 0),
            Metric(contract.NUM_PARAMS_TOTAL, float(counts(cell)[1]), now, 0),
        ]
        client.log_batch(run_id, metrics=metrics, tags=[RunTag(contract.TAG_OUTCOME, "completed")])
        client.set_terminated(run_id, "FINISHED")
        return cell.cell_id, JobRecord(cell.cell_id, "slurm", f"1_{index}", time.time())

    with ThreadPoolExecutor(THREADS) as pool:
        records = dict(pool.map(one, enumerate(study.cells)))
    write_records(study.folder, records)
    return time.perf_counter() - start


def time_status(study) -> tuple[float, float, float, int]:
    """(cold, warm, one driver poll) seconds, and the squeue calls of that poll."""
    from scaling.backends.slurm.executor import SlurmExecutor
    from scaling.backends.slurm.queue import squeue_backoff
    from scaling.driver.watcher import RoundWatcher
    from scaling.state.status import study_status

    cold, rows = timed(study_status, study, True)  # a full search (an existing study: again)
    assert all(r.state == "completed" for r in rows), {r.state for r in rows}
    warm, _ = timed(study_status, study)
    watcher = RoundWatcher(study, SlurmExecutor(study), poll_s=60)
    before = squeue_backoff().calls
    poll, _ = timed(watcher.status)
    return cold, warm, poll, squeue_backoff().calls - before


DRIVER = """
import json, resource, sys, time
from scaling.driver.round_driver import StudyRun
from scaling.driver.environment import load_study_spec
study = load_study_spec(sys.argv[1], check_environment=False)
run = StudyRun(study, poll_s=60)
for _ in range(3):
    start = time.perf_counter(); run.status(); took = time.perf_counter() - start
print(json.dumps({"rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "poll_s": took}))
"""


def driver_process(path: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", DRIVER, str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def time_analyze(path: Path, folder: Path) -> tuple[float, int, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "scaling", "analyze", str(path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=folder,
        timeout=1800,
    )
    last = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or [""]
    return time.perf_counter() - start, proc.returncode, last[0][:160]


# What the runs table shows, read in the page: its rows are ag-grid rows keyed by run id (it
# renders only those in view; `aria-rowcount` counts them all, with the header's rows)
_TABLE_JS = """(() => {
  const ids = new Set(
    [...document.querySelectorAll('[row-id]')].map(e => e.getAttribute('row-id')));
  const grid = document.querySelector('.ag-root[aria-rowcount], [role=treegrid], [role=grid]');
  const text = document.body.innerText;
  return {rendered: ids.size, parent: ids.has(PARENT),
          matching: (text.match(/([\\d,]+) matching runs/) || [])[1] || null,
          grid_rows: grid ? Number(grid.getAttribute('aria-rowcount'))
            - document.querySelectorAll('.ag-header-viewport .ag-header-row').length : null,
          load_more: /Load more/.test(text)};
})()"""
_EXPAND_JS = """(() => {
  const row = document.querySelector('[row-id=' + JSON.stringify(PARENT) + ']');
  const button = row && row.querySelector('button[data-component-id*="runnamecellrenderer"]');
  if (button) { button.click(); }
  return !!button;
})()"""
_LOAD_MORE_JS = """(() => {
  const button = [...document.querySelectorAll('button')].find(b => /Load more/.test(b.innerText));
  if (button) { button.click(); }
  return !!button;
})()"""


def open_in_browser(study, timeout_s: float = 600) -> dict:
    """The MLflow UI's runs table of the study's experiment in headless Chromium
    (`benchmarks.cdp`), as a user opens it: seconds until the parent's row shows and what the
    table states then ("N matching runs": the runs loaded, not the experiment's total); then
    "Load more" clicked until every run is loaded (the UI loads 100 a click), with the clicks
    and the seconds; then the parent expanded (a click on its toggle), the seconds until its
    children show and the rows the grid then holds. FACTS.md: the runs table needs
    `workflowType=machine_learning` in the URL, else the UI opens on the GenAI traces page."""
    from cdp import Browser

    from foundation import contract
    from scaling.state.run_search import experiment_id_http, search_http

    uri = study.mlflow.tracking_uri
    exp_id = experiment_id_http(uri, study.mlflow.experiment)
    role = f"tags.`{contract.TAG_ROLE}` = '{contract.ROLE_STUDY}'"
    parents = search_http(uri, exp_id, f"{role} and tags.{contract.TAG_STUDY} = '{study.name}'")
    parent = min(parents, key=lambda r: r.start_time).run_id
    url = f"{uri.rstrip('/')}/#/experiments/{exp_id}/runs?workflowType=machine_learning"
    table_js = _TABLE_JS.replace("PARENT", json.dumps(parent))
    out: dict = {"url": url}
    browser = Browser()
    try:
        start = time.perf_counter()
        browser.command("Page.navigate", url=url)
        shown = browser.wait_for(f"({table_js}).parent", timeout_s)
        out["table_s"] = None if shown is None else time.perf_counter() - start
        out["first"] = browser.evaluate(table_js)
        if shown is None:
            return out
        loading, out["load_more_clicks"] = time.perf_counter(), 0
        while time.perf_counter() - loading < timeout_s:  # collapsed: the button stays in view
            before = browser.evaluate(table_js)["matching"]
            if not browser.evaluate(_LOAD_MORE_JS):
                break
            out["load_more_clicks"] += 1
            if browser.wait_for(f"({table_js}).matching != {json.dumps(before)}", 120) is None:
                break  # the click loaded nothing
        out["load_all_s"] = time.perf_counter() - loading
        clicked = time.perf_counter()
        out["expanded"] = browser.evaluate(_EXPAND_JS.replace("PARENT", json.dumps(parent)))
        grew = browser.wait_for(f"({table_js}).grid_rows > 1", timeout_s)
        out["children_s"] = None if grew is None else time.perf_counter() - clicked
        out["after"] = browser.evaluate(table_js)
    finally:
        browser.close()
    return out


def measure(path: Path, folder: Path, make_runs: bool) -> str:
    """One table row: every figure of one study (its runs made first if `make_runs`)."""
    from scaling.driver.environment import load_study_spec

    plan_s = time_plan(path)
    study = load_study_spec(path, check_environment=False)
    runs_s = make_instant_runs(study) if make_runs else float("nan")
    cold, warm, poll, calls = time_status(study)
    driver = driver_process(path)
    analyze_s, rc, last = time_analyze(path, folder)
    ui = open_in_browser(study)
    first, after = ui.get("first", {}), ui.get("after", {})
    print(json.dumps(ui), file=sys.stderr)
    return (
        f"{len(study.cells):>7} {plan_s:>7.2f} {runs_s:>7.1f} {cold:>11.2f} {warm:>6.2f} "
        f"{poll:>6.2f} {calls:>6} {driver['rss_mb']:>9.0f} {driver['poll_s']:>8.2f} "
        f"{analyze_s:>9.1f} {_s(ui.get('table_s')):>6} {first.get('matching')!s:>8} "
        f"{_s(ui.get('children_s')):>6} {ui.get('load_more_clicks', 0):>5} "
        f"{_s(ui.get('load_all_s')):>6} {after.get('grid_rows')!s:>7} {rc}  {last if rc else ''}"
    )


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f}"


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cells", nargs="*", type=int, help="study sizes (default 10 100 1000)")
    parser.add_argument(
        "--existing",
        type=Path,
        action="append",
        default=[],
        help="also measure a study this script made before (its YAML; its runs are reused)",
    )
    args = parser.parse_args()
    uri = os.environ.get("SCALING_TEST_MLFLOW_URI")
    if not uri:
        sys.exit("bench_scale.py: source /tmp/svc/env first (SCALING_TEST_MLFLOW_URI)")
    sizes = args.cells or ([] if args.existing else [10, 100, 1000])
    print(f"load average {os.getloadavg()[0]:.1f} at the start")
    print(
        f"{'cells':>7} {'plan s':>7} {'runs s':>7} {'status cold':>11} {'warm':>6} {'poll':>6} "
        f"{'squeue':>6} {'driver MB':>9} {'drv poll':>8} {'analyze s':>9} {'ui s':>6} "
        f"{'matching':>8} {'kids s':>6} {'more':>5} {'all s':>6} {'ui rows':>7} rc"
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for num in sizes:
            print(measure(study_file(folder, num, uri), folder, True), flush=True)
        for path in args.existing:
            print(measure(path.resolve(), path.resolve().parent, False), flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
