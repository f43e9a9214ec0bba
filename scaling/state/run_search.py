"""The study's runs from an MLflow server's REST API, without importing mlflow.

`scaling status` on a 2,000-cell study spent more time in the client than on the server:
importing mlflow (~1.4 s of CPU) and turning the response into protobuf entities (seconds for
2,000 runs with their ~60 params each) only to read a few tags and metrics. Against an HTTP(S)
server this module posts the same `runs/search` request MLflow's client does, in pages of
`PAGE_SIZE`, and keeps the JSON as plain dicts. Other stores (SQLite, a database URI) go through
the MLflow client as before (`search_with_client`). Credentials and TLS come from MLflow's own
environment variables, so a server behind authentication answers here as it does to MLflow.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from foundation import contract

__all__ = [
    "FoundRun",
    "is_http",
    "experiment_id_http",
    "search_http",
    "search_with_client",
]

PAGE_SIZE = 5000  # MLflow's server accepts up to 50,000 a page; fewer round trips is faster
RETRIES = 2


@dataclass(frozen=True)
class FoundRun:
    """The parts of an MLflow run that status reads."""

    run_id: str
    status: str
    start_time: int
    tags: dict[str, str]
    metrics: dict[str, float]


def is_http(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def experiment_id_http(uri: str, experiment: str) -> str | None:
    """The id of the experiment named `experiment` on an HTTP(S) server (`is_http`); None if it
    does not exist."""
    try:
        found = _call(uri, "GET", "experiments/get-by-name", {"experiment_name": experiment})
    except _NotFound:
        return None
    return found["experiment"]["experiment_id"]


def search_http(uri: str, exp_id: str, filter_string: str) -> list[FoundRun]:
    """Every active run of experiment `exp_id` matching `filter_string`, in pages."""
    runs: list[FoundRun] = []
    token = None
    while True:
        body: dict[str, Any] = {
            "experiment_ids": [exp_id],
            "filter": filter_string,
            "max_results": PAGE_SIZE,
        }
        if token:
            body["page_token"] = token
        page = _call(uri, "POST", "runs/search", body)
        runs.extend(_found(run) for run in page.get("runs", []))
        token = page.get("next_page_token")
        if not token:
            return runs


def search_with_client(client: Any, exp_id: str, filter_string: str) -> list[FoundRun]:
    """The same records through an MlflowClient (any store MLflow supports)."""

    return [
        FoundRun(
            run.info.run_id,
            run.info.status,
            run.info.start_time,
            dict(run.data.tags),
            dict(run.data.metrics),
        )
        for run in contract.search_runs(client, exp_id, filter_string)
    ]


def _found(run: dict[str, Any]) -> FoundRun:
    info, data = run["info"], run.get("data", {})
    return FoundRun(
        run_id=info["run_id"],
        status=info.get("status", "RUNNING"),
        start_time=int(info.get("start_time", 0)),
        tags={t["key"]: t.get("value", "") for t in data.get("tags", [])},
        metrics={m["key"]: float(m["value"]) for m in data.get("metrics", [])},
    )


class _NotFound(Exception):
    pass


def _headers() -> dict[str, str]:
    headers = {"Content-Type": "application/json", "User-Agent": "scaling-status"}
    token = os.environ.get("MLFLOW_TRACKING_TOKEN")
    user, password = (os.environ.get(f"MLFLOW_TRACKING_{k}") for k in ("USERNAME", "PASSWORD"))
    if token:
        headers["Authorization"] = f"Bearer {token}"
    elif user and password:
        basic = base64.b64encode(f"{user}:{password}".encode()).decode()
        headers["Authorization"] = f"Basic {basic}"
    return headers


def _tls() -> ssl.SSLContext | None:
    if os.environ.get("MLFLOW_TRACKING_INSECURE_TLS", "").lower() == "true":
        return ssl._create_unverified_context()  # noqa: S323 - the user asked MLflow for it
    cafile = os.environ.get("MLFLOW_TRACKING_SERVER_CERT_PATH")
    client_cert = os.environ.get("MLFLOW_TRACKING_CLIENT_CERT_PATH")
    if not (cafile or client_cert):
        return None
    context = ssl.create_default_context(cafile=cafile)
    if client_cert:
        context.load_cert_chain(client_cert)
    return context


def _call(uri: str, method: str, endpoint: str, payload: dict[str, Any]) -> dict[str, Any]:
    url = f"{uri.rstrip('/')}/api/2.0/mlflow/{endpoint}"
    data = None
    if method == "GET":
        url += "?" + urllib.parse.urlencode(payload)
    else:
        data = json.dumps(payload).encode()
    timeout = float(os.environ.get("MLFLOW_HTTP_REQUEST_TIMEOUT", "120"))
    request = urllib.request.Request(url, data=data, headers=_headers(), method=method)
    for attempt in range(RETRIES + 1):
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=_tls()) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as err:
            body = err.read().decode(errors="replace")
            if err.code == 404 and "RESOURCE_DOES_NOT_EXIST" in body:
                raise _NotFound(body) from None
            if err.code < 500 or attempt == RETRIES:
                message = f"MLflow {endpoint} at {uri}: HTTP {err.code}: {body[:300]}"
                raise RuntimeError(message) from None
        except (urllib.error.URLError, OSError) as err:
            if attempt == RETRIES:
                raise ConnectionError(f"MLflow at {uri} does not answer: {err}") from err
        time.sleep(1.0 + attempt)
    raise AssertionError("unreachable")
