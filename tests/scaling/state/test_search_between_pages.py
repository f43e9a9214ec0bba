"""`scaling.state.run_search` while runs are created or deleted between two pages of a search
(issue 63, round four): `submit` (through the MLflow client) and `status` / `analyze` (through
the REST API) read every run that existed throughout exactly once. Before, a deletion shifted
MLflow's offset pages: a finished cell's run was missed and trained again; a creation showed
the previous page's last run twice."""

from __future__ import annotations

import uuid

from mlflow.tracking import MlflowClient

from foundation import mlflow_rest
from scaling.state import run_search
from scaling.state.run_search import search_http, search_with_client

QUERY = "tags.study = 's'"


def _experiment(uri: str, num: int) -> tuple[MlflowClient, str, list[str]]:
    """An experiment with `num` finished runs of study `s`, newest last."""
    client = MlflowClient(uri)
    exp_id = client.create_experiment(f"tests-pages-{uuid.uuid4().hex[:8]}")
    ids = []
    for i in range(num):
        run = client.create_run(exp_id, run_name=f"c{i}", tags={"study": "s", "cell_id": f"c{i}"})
        client.set_terminated(run.info.run_id, "FINISHED")
        ids.append(run.info.run_id)
    return client, exp_id, ids


class _DeletesAfterFirstPage:
    """An MlflowClient that deletes `victim` once its first page has been answered."""

    def __init__(self, client: MlflowClient, victim: str) -> None:
        self.client, self.victim, self.pages = client, victim, 0

    def search_runs(self, *args, **kwargs):
        page = self.client.search_runs(*args, **kwargs)
        self.pages += 1
        if self.pages == 1:
            self.client.delete_run(self.victim)
        return page


def test_submits_search_misses_no_run_when_one_is_deleted_between_pages(mlflow_server, monkeypatch):
    client, exp_id, ids = _experiment(mlflow_server, 7)
    monkeypatch.setattr(run_search, "PAGE_SIZE", 3)
    victim = ids[-1]  # the newest: on the first page, every later run moves up by one
    found = search_with_client(_DeletesAfterFirstPage(client, victim), exp_id, QUERY)
    got = [r.run_id for r in found]
    assert sorted(got) == sorted(i for i in ids if i != victim)


def test_status_search_reads_a_run_created_between_pages_once(mlflow_server, monkeypatch):
    client, exp_id, ids = _experiment(mlflow_server, 7)
    monkeypatch.setattr(run_search, "PAGE_SIZE", 3)
    real = mlflow_rest.call
    created: list[str] = []

    def call(*args, **kwargs):
        answer = real(*args, **kwargs)
        if args[2] == "runs/search" and not created:  # a cell starts: its new run sorts first
            run = client.create_run(exp_id, run_name="new", tags={"study": "s"})
            created.append(run.info.run_id)
        return answer

    monkeypatch.setattr(mlflow_rest, "call", call)
    got = [r.run_id for r in search_http(mlflow_server, exp_id, QUERY)]
    assert len(got) == len(set(got)), got
    assert sorted(got) == sorted([*ids, *created])
