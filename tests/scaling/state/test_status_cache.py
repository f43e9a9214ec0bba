"""The status cache of FINISHED runs (`scaling.state.run_cache`) gives what a full MLflow search
gives.

The study's runs are created and moved through their life with the calls `submit` and the job
make (`ensure_parent_run`, `ensure_cell_run`, then the run's status, metrics and outcome tag),
on a real MLflow store: SQLite through the client, and a tracking server through REST.
"""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path

import pytest
from mlflow.entities import Metric, RunTag
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from foundation import contract as C
from scaling.cli import app
from scaling.spec.resolved import ResolvedStudy
from scaling.state import run_cache
from scaling.state.mlflow_state import cell_runs, ensure_cell_run, ensure_parent_run
from scaling.state.run_cache import CellRun
from scaling.state.status import study_status
from tests.scaling.conftest import one_size_spec
from tests.scaling.helpers import write_and_load


def _study(tmp_path: Path, data_dir: Path, uri: str) -> ResolvedStudy:
    """4 cells: 30K x (linear, nonlinear) x seeds 0, 1."""
    spec = one_size_spec(data_dir, tmp_path / "study", uri, steps=12, seeds=[0, 1])
    return write_and_load(spec, tmp_path / "study.yaml")


def _truth(study: ResolvedStudy) -> dict[str, CellRun]:
    """cell id → its run, read with the MLflow client's own full search: the oracle."""
    client = MlflowClient(study.mlflow.tracking_uri)
    exp = client.get_experiment_by_name(study.mlflow.experiment)
    out: dict[str, CellRun] = {}
    for run in C.search_runs(client, exp.experiment_id, f"tags.{C.TAG_STUDY} = '{study.name}'"):
        tags, metrics = run.data.tags, run.data.metrics
        if C.TAG_CELL_ID not in tags or tags.get(C.TAG_ROLE) == C.ROLE_STUDY:
            continue
        cell_run = CellRun(
            run.info.run_id,
            run.info.status,
            tags.get(C.TAG_OUTCOME),
            metrics.get(C.FINAL_VAL_LOSS),
            metrics.get(C.VAL_LOSS),
            run.info.start_time,
            tags.get(C.TAG_CONFIG_HASH),
            metrics.get(C.FINAL_SELECT_LOSS),
        )
        old = out.get(tags[C.TAG_CELL_ID])
        if old is None or cell_run.start_time < old.start_time:
            out[tags[C.TAG_CELL_ID]] = cell_run
    return out


class _Job:
    """What a cell's job does to its MLflow run, through the client."""

    def __init__(self, client: MlflowClient, run_id: str) -> None:
        self.client, self.run_id = client, run_id

    def start(self) -> None:
        self.client.update_run(self.run_id, status="RUNNING")
        self.client.set_tag(self.run_id, C.TAG_OUTCOME, "running")
        self.client.log_metric(self.run_id, C.VAL_LOSS, 5.5, step=4)

    def finish(self, outcome: str, loss: float | None) -> None:
        metrics = [Metric(C.VAL_LOSS, 5.0, 0, 8)]
        if loss is not None:
            metrics.append(Metric(C.FINAL_VAL_LOSS, loss, 0, 12))
        tags = [RunTag(C.TAG_OUTCOME, outcome)]
        self.client.log_batch(self.run_id, metrics=metrics, tags=tags)
        self.client.set_terminated(self.run_id, "FINISHED")


def _submit(study: ResolvedStudy, client: MlflowClient, cells, existing=None) -> list[_Job]:
    parent = ensure_parent_run(study, client)
    exp_id = C.experiment_id(client, study.mlflow.experiment)
    existing = existing or {}
    return [
        _Job(client, ensure_cell_run(client, exp_id, parent, c, existing.get(c.cell_id)))
        for c in cells
    ]


class _Recording:
    """Counts the filters a poll sends, to show what a warm poll asks the server for."""

    def __init__(self, client: MlflowClient, exp_id: str) -> None:
        from scaling.state.run_search import search_with_client

        self.filters: list[str] = []
        self.client, self.exp_id, self._search = client, exp_id, search_with_client

    def search(self, filter_string: str) -> list:
        self.filters.append(filter_string)
        return self._search(self.client, self.exp_id, filter_string)


@pytest.fixture(params=["sqlite", "server"])
def tracking_uri(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/mlflow.db"
    return request.getfixturevalue("mlflow_server")


def test_cached_polls_match_a_full_search_through_a_study_life(tmp_path, data_dir, tracking_uri):
    study = _study(tmp_path, data_dir, tracking_uri)
    cache = study.folder / run_cache.CACHE_NAME
    client = MlflowClient(tracking_uri)

    def check(expected_states: list[str]) -> None:
        assert cell_runs(study) == _truth(study)
        assert [r.state for r in study_status(study)] == expected_states

    assert cell_runs(study) == {}  # no experiment yet: no cache either
    assert not cache.exists()
    a, b, c, d = study.cells
    jobs = _submit(study, client, [a, b, c])  # d stays pending: never submitted
    # SCHEDULED runs without a live job and without a job record: their submit died before it
    # gave them a job, so nothing ran and nothing failed (`scaling.state.status.never_started`)
    check(["pending"] * 4)
    assert cache.is_file()
    for job in jobs:
        job.start()
    check(["pending"] * 4)  # RUNNING (MLflow's state of a new run) and still no record: the same
    jobs[0].finish(C.COMPLETED, 4.25)
    jobs[1].finish(C.DIVERGED, None)
    check(["completed", "diverged", "pending", "pending"])
    cached = json.loads(cache.read_text())
    assert set(cached["finished"]) == {jobs[0].run_id, jobs[1].run_id}
    assert cached["unfinished"] == [jobs[2].run_id]

    # c's run fails; the next submit sets it back to SCHEDULED (and its job to RUNNING): it
    # was never cached, so the poll sees it go back
    client.set_terminated(jobs[2].run_id, "FAILED")
    check(["completed", "diverged", "failed", "pending"])
    (again,) = _submit(study, client, [c], existing=cell_runs(study))
    assert again.run_id == jobs[2].run_id
    again.start()
    assert client.get_run(again.run_id).info.status == "RUNNING"
    check(["completed", "diverged", "pending", "pending"])
    assert cell_runs(study)[c.cell_id].status == "RUNNING"
    # d is submitted and finishes between two polls: it was never seen unfinished, and is found
    # through the run id that submit wrote into its output dir
    (late,) = _submit(study, client, [d])
    late.start()
    late.finish(C.COMPLETED, 4.5)
    again.finish(C.COMPLETED, 4.0)
    check(["completed", "diverged", "completed", "completed"])
    cached = json.loads(cache.read_text())
    assert len(cached["finished"]) == 4 and cached["unfinished"] == []

    # a warm poll of a finished study asks only for the unfinished runs: no run is serialised
    exp_id = C.experiment_id(client, study.mlflow.experiment)
    recording = _Recording(client, exp_id)
    polled = run_cache.poll_runs(study, exp_id, recording.search)
    assert len(polled) == 4
    of_study = f"tags.{C.TAG_STUDY} = '{study.name}'"
    assert recording.filters == [f"{of_study} and attributes.status != 'FINISHED'"]
    # and reads the unchanged cache file only once per process (issue 53: 1.2 s a poll at
    # 10,000 cells); a file another process wrote since (a rename: a new inode) is read again
    parsed = []
    real_json = run_cache.json
    counting = type("Json", (), {"loads": lambda text: parsed.append(1) or real_json.loads(text)})
    counting.dumps = real_json.dumps
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(run_cache, "json", counting)
        assert run_cache.poll_runs(study, exp_id, recording.search) == polled
        assert run_cache.poll_runs(study, exp_id, recording.search) == polled
        assert parsed == []
        from foundation.atomic import write_text

        write_text(cache, cache.read_text())
        assert run_cache.poll_runs(study, exp_id, recording.search) == polled
        assert parsed == [1]

    # a run deleted in MLflow stays in the cache until an explicit refresh
    client.delete_run(jobs[0].run_id)
    assert a.cell_id not in _truth(study)
    assert cell_runs(study)[a.cell_id].run_id == jobs[0].run_id  # stale, as documented
    result = CliRunner().invoke(
        app, ["status", str(tmp_path / "study.yaml"), "--refresh"], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    assert all(n in result.output for n in ("2 completed", "1 diverged", "1 pending")), (
        result.output
    )
    assert cell_runs(study) == _truth(study)
    assert jobs[0].run_id not in json.loads(cache.read_text())["finished"]


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text[: len(text) // 2],  # torn
        lambda text: "not json",
        lambda text: text.replace('"FINISHED"', '"RUNNING"', 1),  # an unfinished run cached
        lambda text: text.replace('"outcome": "completed"', '"outcome": 3', 1),  # a wrong type
        lambda text: text.replace('"cell_id": ', '"cell": ', 1),  # a field renamed
        lambda text: json.dumps({**json.loads(text), "version": run_cache.VERSION + 1}),
        lambda text: text.replace('"study": "tiny-study"', '"study": "other"', 1),  # not ours
    ],
    ids=["torn", "not-json", "unfinished", "bad-type", "renamed", "version", "other-study"],
)
def test_a_damaged_cache_is_rebuilt_by_a_full_search(tmp_path, data_dir, damage):
    study = _study(tmp_path, data_dir, f"sqlite:///{tmp_path}/mlflow.db")
    client = MlflowClient(study.mlflow.tracking_uri)
    jobs = _submit(study, client, study.cells)
    for job in jobs:
        job.start()
        job.finish(C.COMPLETED, 4.0)
    cache = study.folder / run_cache.CACHE_NAME
    assert cell_runs(study) == _truth(study)
    good = cache.read_text()
    # the cache now claims a wrong loss for one run: trusted, as a FINISHED run cannot change...
    lying = json.loads(good)
    lying["finished"][jobs[0].run_id]["final_val_loss"] = 9.0
    cache.write_text(damage(json.dumps(lying, indent=0)))
    # ... but a damaged file is never read: the full search gives the true loss and a new file
    exp_id = C.experiment_id(client, study.mlflow.experiment)
    recording = _Recording(client, exp_id)
    runs = run_cache.poll_runs(study, exp_id, recording.search)
    assert recording.filters == [f"tags.{C.TAG_STUDY} = '{study.name}'"]  # the full search
    assert {e.run.final_val_loss for e in runs.values()} == {4.0}
    assert json.loads(cache.read_text()) == json.loads(good)


def _write_many(path: str, seed: int, times: int) -> None:
    """Write a large cache again and again, as a `status --refresh` poll does."""
    entries = {
        f"{seed}x{i:05d}": run_cache.Entry(
            f"cell-{i}", CellRun(f"{seed}x{i:05d}", "FINISHED", "completed", 4.0, 4.1, i, "h")
        )
        for i in range(3000)
    }
    key = {"tracking_uri": "u", "experiment_id": "1", "study": "s"}
    for _ in range(times):
        run_cache._save(Path(path), key, entries, None)


def test_concurrent_writers_never_leave_a_torn_cache(tmp_path):
    path = tmp_path / run_cache.CACHE_NAME
    key = {"tracking_uri": "u", "experiment_id": "1", "study": "s"}
    ctx = mp.get_context("spawn")
    writers = [ctx.Process(target=_write_many, args=(str(path), s, 40)) for s in (1, 2)]
    for w in writers:
        w.start()
    reads = 0
    while any(w.is_alive() for w in writers):
        if path.exists():
            loaded = run_cache._load(path, key)
            assert loaded is not None, "a reader saw a torn or mixed cache file"
            finished, _ = loaded
            assert len(finished) == 3000 and len({i.split("x")[0] for i in finished}) == 1
            reads += 1
    for w in writers:
        w.join()
        assert w.exitcode == 0
    assert reads > 0 and run_cache._load(path, key) is not None
    assert not list(tmp_path.glob(".*.tmp"))  # every temporary was renamed into place


def test_a_writer_that_overtakes_another_cannot_tear_its_file(tmp_path, monkeypatch):
    """The interleaving a shared filesystem makes likely, forced: writer 1 has written half its
    temporary file when writer 2 writes the whole cache; writer 1 then finishes. With one
    temporary name for both, writer 1's second half landed in writer 2's renamed file."""
    from foundation import atomic

    path = tmp_path / run_cache.CACHE_NAME
    first, second = "1" * 10_000, "2" * 10_000
    real_write_new = atomic._write_new
    overtaken = []

    def slow_write(tmp: Path, data: bytes) -> None:
        if data != first.encode() or overtaken:
            return real_write_new(tmp, data)
        with open(tmp, "xb") as f:
            f.write(data[: len(data) // 2])
            f.flush()
            overtaken.append(True)
            atomic.write_text(path, second)  # writer 2, start to end
            assert path.read_text() == second
            f.write(data[len(data) // 2 :])

    monkeypatch.setattr(atomic, "_write_new", slow_write)
    atomic.write_text(path, first)
    assert overtaken and path.read_text() == first  # one writer's whole file: the last rename
    assert not list(tmp_path.glob(".*.tmp"))
