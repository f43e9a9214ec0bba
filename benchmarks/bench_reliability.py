"""Scale of the tracking stack a cluster uses: a 2,000-cell study on a PostgreSQL-backed server.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_reliability.py [--cells-only]
        [--writer-points 2000]

Starts its own PostgreSQL (scripts/postgres.sh) and MLflow server on it, both on loopback, and
a SQLite-backed server beside it, then measures:
  1. `scaling plan` and `scaling status` (the CLI, as a user runs it, so imports count) on a
     2,000-cell study (2 sizes x 4 arms x 25 seeds x 10 LRs) whose 2,000 cell runs exist, all
     finished, in that server, each with what a real cell logs (~60 params, ~20 tags, 13
     metrics, a dataset input). Target: each <= 5 s. status is timed cold (no
     cache in the study folder: one full search, which writes `mlflow_runs.json`), warm (the
     cache of finished runs: the server is asked only for unfinished runs), warm with `--all`,
     with `--refresh`, and warm while 200 runs are RUNNING and once they FINISHED again; then
     the single `runs/search` queries behind them.
  2. tracker write throughput (points/s through `jobs.telemetry.tracking.Tracker`, spool to server)
     with 1 and 16 concurrent writer processes, SQLite-backed vs PostgreSQL-backed server.
Not a test: figures depend on the machine; run it and read them.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.reliability.services import MlflowServer, Postgres  # noqa: E402

SCALING = str(Path(sys.executable).with_name("scaling"))
NUM_CELLS = 2000
# Process groups of the MLflow server and of PostgreSQL: their CPU is what a poll costs the
# shared server, and unlike wall time it barely depends on what else the machine runs.
SERVER_GROUPS: set[int] = set()
Timing = tuple[float, float, str]  # wall s, server CPU s, stdout


def study_spec(folder: Path, data: Path, uri: str, name: str = "bench-2000") -> dict:
    """2 sizes x 4 arms x 25 seeds x 10 LR multipliers = 2,000 cells."""
    return {
        "name": name,
        "output_dir": str(folder),
        "mlflow": {"experiment": name, "tracking_uri": uri},
        "data": {"path": str(data), "num_val_windows": 4},
        "sizes": ["30K", "60K"],
        "variants": ["linear", "linear_qknorm", "nonlinear", "wider_mlp"],
        "seeds": list(range(25)),
        "model": {"seq_length": 32},
        "ladder": {
            "shapes": {
                "30K": {"num_layers": 1, "hidden_size": 48, "num_attention_heads": 2},
                "60K": {"num_layers": 2, "hidden_size": 48, "num_attention_heads": 2},
            }
        },
        "lr": {"multipliers": [0.25, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 2.8, 4.0, 5.6]},
        "tokens": {"per_size": {"30K": 3072, "60K": 3072}},
        "batch": {"rule": "fixed", "tokens": 256, "micro_batch_size": 4},
        "precision": "fp32",
        "slurm": {"time_limit_min": 20},
    }


def populate(study_path: Path, backend_uri: str) -> int:
    """Create every cell's run as a finished cell leaves it, straight into the database.

    Each run carries what a real cell logs (`jobs.telemetry.record`): its tags with provenance, the
    flattened run config as params (~60), the per-step metrics' last values, the summary
    metrics and the dataset input, so the server's search costs what it costs on a real study.
    """
    from mlflow.entities import Dataset, DatasetInput, InputTag, Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    from foundation import contract as C
    from foundation.atomic import write_text
    from foundation.config import flatten, to_dict
    from foundation.provenance import git_commit, host_name, versions
    from jobs.telemetry.record import RunResult, dataset_input, write_result
    from scaling.driver.environment import load_study_spec
    from scaling.state.mlflow_state import ensure_parent_run

    study = load_study_spec(study_path, check_environment=False)
    study.mlflow.tracking_uri = backend_uri  # direct SQL: 2,000 runs in minutes, not an hour
    client = MlflowClient(backend_uri)
    parent = ensure_parent_run(study, client)
    exp_id = client.get_experiment_by_name(study.mlflow.experiment).experiment_id
    cells = [cell.with_parent(parent) for cell in study.cells]
    data = dataset_input(study.spec.dataset_path)
    dataset = DatasetInput(
        Dataset(
            name=data["name"],
            digest=data["digest"],
            source_type="local",
            source=json.dumps({"uri": data["source"]}),
            profile=json.dumps(data["profile"]),
        ),
        tags=[InputTag("mlflow.data.context", "training")],
    )
    provenance = {
        "git_commit": git_commit(),
        "host": host_name(),
        "device": "cpu (2 cores, 1 threads)",
        "world_size": "1",
        **versions(),
    }
    per_step = ("train/loss", "val/loss", "lr", "grad_norm", "tokens_seen", "tokens_per_s")
    per_step += ("mfu", "step_time_s")
    summary = (C.FINAL_VAL_LOSS, C.NUM_PARAMS_TOTAL, C.NUM_NONEMBEDDING_PARAMS, C.TOKENS)
    summary += (C.FLOPS,)

    def create(cell) -> None:
        tags = {C.TAG_PARENT: parent, **cell.tags, **provenance, C.TAG_OUTCOME: C.COMPLETED}
        tags[C.TAG_CONFIG_HASH] = cell.config_hash
        run = client.create_run(exp_id, run_name=cell.cell_id)
        now = int(time.time() * 1000)
        params = flatten(to_dict(cell.run))
        client.log_batch(
            run.info.run_id,
            metrics=[Metric(name, 4.0, now, 12) for name in per_step + summary],
            params=[Param(k, str(v)[:6000]) for k, v in params.items()],
            tags=[RunTag(k, str(v)) for k, v in tags.items()],
        )
        client.log_inputs(run.info.run_id, datasets=[dataset])
        client.set_terminated(run.info.run_id, "FINISHED")
        # the cell's folder as a finished cell leaves it: its run id (written by submit and
        # the tracker) and its result (`jobs.telemetry.record.write_result`)
        out = Path(cell.run.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        write_text(out / C.RUN_ID_FILE, run.info.run_id)
        steps = cell.run.train.steps
        result = RunResult(C.COMPLETED, 4.0, steps, 3072, run.info.run_id, [4.0] * steps)
        write_result(cell.run, result)

    create(cells[0])  # the first creates the dataset: concurrent first inserts would collide
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, cells[1:]))
    return len(cells)


def cells_finishing(backend_uri: str, study_path: Path, num: int) -> tuple[Timing, Timing]:
    """Warm `status` while `num` runs are RUNNING (a resubmission of failed cells), then after
    they FINISHED again: the poll fetches those runs, by status and then by id."""
    from mlflow.tracking import MlflowClient

    from foundation import contract as C

    client = MlflowClient(backend_uri)
    exp = client.get_experiment_by_name(yaml.safe_load(study_path.read_text())["name"])
    cells = f"tags.{C.TAG_CELL_ID} LIKE '%'"
    ids = [r.info.run_id for r in client.search_runs([exp.experiment_id], cells, max_results=num)]
    for run_id in ids:
        client.update_run(run_id, status="RUNNING")
    running = timed_status([str(study_path)])
    assert f"{num} failed" in running[2], running[2][-500:]  # RUNNING, no live job: it died
    for run_id in ids:
        client.set_terminated(run_id, "FINISHED")
    finished = timed_status([str(study_path)])
    assert f"{NUM_CELLS} completed" in finished[2], finished[2][-500:]
    return running, finished


def query_costs(uri: str, study_path: Path) -> dict[str, float]:
    """Seconds of one `runs/search` (server + transfer) for the filters a status poll sends."""
    from foundation import contract as C
    from scaling.state.run_search import experiment_id_http, search_http

    name = yaml.safe_load(study_path.read_text())["name"]
    exp_id = experiment_id_http(uri, name)
    of_study = f"tags.{C.TAG_STUDY} = '{name}'"
    ids = [r.run_id for r in search_http(uri, exp_id, of_study)]
    costs = {}
    for what, filter_string in (
        ("of the study (the full search)", of_study),
        ("not FINISHED (every warm poll)", f"{of_study} and attributes.status != 'FINISHED'"),
        ("200 run ids IN (...) (finished since last)", _ids_in(ids[:200])),
    ):
        start = time.perf_counter()
        search_http(uri, exp_id, filter_string)
        costs[what] = time.perf_counter() - start
    return costs


def _ids_in(ids: list[str]) -> str:
    return "attributes.run_id IN ({})".format(", ".join(f"'{i}'" for i in ids))


def timed_cli(args: list[str]) -> tuple[float, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", COLUMNS="200")
    start = time.perf_counter()
    out = subprocess.run([SCALING, *args], env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - start, out.stdout


def server_cpu_s() -> float:
    """CPU seconds (user + system) the server processes have used so far (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        if int(fields[2]) in SERVER_GROUPS:  # pgrp; utime and stime follow
            total += int(fields[11]) + int(fields[12])
    return total / tick


def timed_status(args: list[str]) -> Timing:
    """(wall seconds, server CPU seconds, stdout) of one `scaling status` process."""
    cpu = server_cpu_s()
    wall, out = timed_cli(["status", *args])
    return wall, server_cpu_s() - cpu, out


def _server_groups(server: MlflowServer, pg: Postgres) -> set[int]:
    groups = {os.getpgid(server.proc.pid)}
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(pg.root).encode() in cmdline.read_bytes():
                groups.add(os.getpgid(int(cmdline.parent.name)))  # the postmaster's backends
        except (OSError, ProcessLookupError):
            continue
    return groups


def _writer(uri: str, out: Path, points: int, ready, go) -> None:
    from jobs.config import TrackingConfig
    from jobs.telemetry.tracking import Tracker

    tracker = Tracker(out, TrackingConfig(tracking_uri=uri, experiment="bench-writers"), "w")
    ready.release()
    go.wait()
    for step in range(1, points // 5 + 1):  # 5 metrics a step, like a small training loop
        tracker.log_metrics({f"m{i}": step * 0.5 + i for i in range(5)}, step=step)
    assert tracker.close(timeout_s=600), tracker.last_error


def writer_throughput(uri: str, root: Path, num_writers: int, points: int) -> float:
    """Points/s from the first log call to the last upload, all writers together."""
    ctx = mp.get_context("spawn")
    ready, go = ctx.Semaphore(0), ctx.Event()
    procs = [
        ctx.Process(target=_writer, args=(uri, root / f"w{i}", points, ready, go))
        for i in range(num_writers)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.acquire()  # every tracker created its run: time only the logging
    start = time.perf_counter()
    go.set()
    for p in procs:
        p.join()
        assert p.exitcode == 0
    return num_writers * points / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells-only", action="store_true", help="skip the throughput part")
    parser.add_argument("--writer-points", type=int, default=2000, help="points per writer")
    args = parser.parse_args()
    from data_prep.testing import tiny_dataset

    root = Path(tempfile.mkdtemp(prefix="bench-reliability-"))
    root.chmod(0o755)  # as root, PostgreSQL runs as `postgres` and must reach root/postgres
    pg = Postgres(root / "postgres").start()
    pg_server = MlflowServer(root / "mlflow-pg", pg.dsn)
    sqlite_server = MlflowServer(root / "mlflow-sqlite", f"sqlite:///{root / 'mlflow.db'}")
    try:
        pg_server.start()
        data = tiny_dataset(root / "data")
        study_path = root / "study.yaml"
        study_path.write_text(yaml.safe_dump(study_spec(root / "study", data, pg_server.uri)))
        start = time.perf_counter()
        n = populate(study_path, pg.dsn)
        print(f"populated {n} finished cell runs in {time.perf_counter() - start:.1f} s")
        plan_s, _ = timed_cli(["plan", str(study_path), "--no-check-environment"])
        plan_env_s, _ = timed_cli(["plan", str(study_path)])
        cache = root / "study" / "mlflow_runs.json"
        SERVER_GROUPS.update(_server_groups(pg_server, pg))
        path = str(study_path)
        cold = timed_status([path])
        assert f"{NUM_CELLS} completed" in cold[2] and cache.is_file(), cold[2][-500:]
        warm = timed_status([path])
        assert f"{NUM_CELLS} completed" in warm[2], warm[2][-500:]
        warm_all = timed_status([path, "--all"])
        assert warm_all[2].count("completed") == NUM_CELLS + 1, warm_all[2][-500:]  # + tally
        refresh = timed_status([path, "--refresh"])
        running, finished = cells_finishing(pg.dsn, study_path, 200)
        print(f"scaling plan   (2,000 cells, offline):          {plan_s:.2f} s")
        print(f"scaling plan   (2,000 cells, checks the server): {plan_env_s:.2f} s")
        for what, (wall, cpu, _) in (
            ("cold (no cache: full search)", cold),
            ("warm (cache of finished runs)", warm),
            ("--all, warm (every cell's row)", warm_all),
            ("--refresh (full search again)", refresh),
            ("warm, 200 runs RUNNING", running),
            ("warm, those 200 just FINISHED", finished),
        ):
            print(f"scaling status {what:32s} {wall:5.2f} s wall, {cpu:5.2f} s server CPU")
        for what, seconds in query_costs(pg_server.uri, study_path).items():
            print(f"  one runs/search, {what:42s} {seconds:.2f} s")
        if args.cells_only:
            return
        sqlite_server.start()
        for name, server in (("SQLite", sqlite_server), ("PostgreSQL", pg_server)):
            for writers in (1, 16):
                rate = writer_throughput(
                    server.uri, root / f"{name}-{writers}", writers, args.writer_points
                )
                print(
                    f"tracker throughput, {name:10s} server, {writers:2d} writer(s) x "
                    f"{args.writer_points} points: {rate:,.0f} points/s"
                )
    finally:
        sqlite_server.kill()
        pg_server.kill()
        pg.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
