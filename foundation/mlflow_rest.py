"""MLflow's REST API, called directly: no mlflow import and no protobuf entities.

At 10,000 runs the MLflow client costs more than the server: importing mlflow (~1.4 s of CPU),
turning each page of `runs/search` into protobuf entities (every run with its ~60 params), and
one `get-history` round trip per run and metric for the training curves. Against an HTTP(S)
server, `call` posts the same requests the client does and keeps the JSON as plain dicts;
`search_runs` pages `runs/search` (at the page size that costs the server least), and
`metric_histories` reads the histories of up to `BULK_RUNS` runs per request
(`metrics/get-history-bulk`).
Credentials and TLS come from MLflow's own environment variables, so a server behind
authentication answers here as it does to MLflow. Other stores (SQLite, a database URI) keep
going through the MLflow client, in their callers.
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
from typing import Any

__all__ = [
    "NotFound",
    "NoEndpoint",
    "is_http",
    "call",
    "experiment_id",
    "search_runs",
    "metric_histories",
    "SEARCH_PAGE",
    "BULK_RUNS",
    "BULK_POINTS",
]

# Runs per `runs/search` page. The server accepts up to 50,000, but its time per page grows
# faster than the page (MLflow 3.17 on PostgreSQL, 10,008 runs: 500 runs 0.7 s, 1,000 2.3 s,
# 2,000 7.7 s, 5,000 28.9 s), and a 10,000-run page outlasted the client's 20 s request
# timeout under load: pages of 1,000 (as MLflow's own client pages) cost the least in all.
SEARCH_PAGE = 1000
BULK_RUNS = 100  # run ids per get-history-bulk request (the server's limit)
BULK_POINTS = 25_000  # points per get-history-bulk answer, all runs together (the server's cap)
RETRIES = 2


class NotFound(Exception):
    """The server says the resource does not exist (HTTP 404, RESOURCE_DOES_NOT_EXIST)."""


class NoEndpoint(RuntimeError):
    """HTTP 404 for the endpoint itself: a server older than the call, or a wrong base URI."""


def is_http(uri: str | None) -> bool:
    return bool(uri) and uri.startswith(("http://", "https://"))


def experiment_id(uri: str, experiment: str) -> str | None:
    """The id of the experiment named `experiment`; None if it does not exist."""
    try:
        found = call(uri, "GET", "experiments/get-by-name", {"experiment_name": experiment})
    except NotFound:
        return None
    return found["experiment"]["experiment_id"]


def search_runs(uri: str, exp_id: str, filter_string: str, page: int = SEARCH_PAGE) -> list[dict]:
    """Every active run of experiment `exp_id` matching `filter_string`, as the server's JSON
    (`{"info": {...}, "data": {"tags": [...], "metrics": [...], "params": [...]}}`), in pages
    of `page` runs (`SEARCH_PAGE`)."""
    runs: list[dict] = []
    token = None
    while True:
        body: dict[str, Any] = {
            "experiment_ids": [exp_id],
            "filter": filter_string,
            "max_results": page,
        }
        if token:
            body["page_token"] = token
        answer = call(uri, "POST", "runs/search", body)
        runs.extend(answer.get("runs", []))
        token = answer.get("next_page_token")
        if not token:
            return runs


def metric_histories(uri: str, run_ids: list[str], key: str) -> tuple[dict[str, list[dict]], bool]:
    """run_id -> the points (`step`, `value`, `timestamp`) of metric `key`, in the order of
    `get_metric_history` (timestamp, step, value), for at most `BULK_RUNS` runs in one request,
    and whether the answer is whole: the server stops at `BULK_POINTS` points in all, so an
    answer of that many may lack some (the caller asks again for fewer runs).

    The endpoint, `metrics/get-history-bulk`, is the one MLflow's own UI draws its charts with
    (under `ajax-api/`): one SQL query for all the runs. The documented
    `get-history-bulk-interval` costs several queries per run on the server (10x slower for
    100 runs, measured) and samples a history past 2,500 points. Raises NoEndpoint on a server
    without it."""
    if len(run_ids) > BULK_RUNS:
        raise ValueError(f"metric_histories: at most {BULK_RUNS} run ids, got {len(run_ids)}")
    answer = call(
        uri,
        "GET",
        "metrics/get-history-bulk",
        {"run_id": run_ids, "metric_key": key, "max_results": BULK_POINTS},
        api="ajax-api",
    )
    points = answer.get("metrics", [])
    out: dict[str, list[dict]] = {}
    for point in points:
        out.setdefault(point["run_id"], []).append(point)
    return out, len(points) < BULK_POINTS


def _headers() -> dict[str, str]:
    headers = {"Content-Type": "application/json", "User-Agent": "scaling"}
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


def call(
    uri: str, method: str, endpoint: str, payload: dict[str, Any], api: str = "api"
) -> dict[str, Any]:
    """One REST call to `<uri>/<api>/2.0/mlflow/<endpoint>`; a GET's list values are sent as
    repeated parameters. Retries a 5xx or a refused connection twice; NotFound for a missing
    resource, NoEndpoint for a missing endpoint, RuntimeError for another refusal."""
    url = f"{uri.rstrip('/')}/{api}/2.0/mlflow/{endpoint}"
    data = None
    if method == "GET":
        url += "?" + urllib.parse.urlencode(payload, doseq=True)
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
            message = f"MLflow {endpoint} at {uri}: HTTP {err.code}: {body[:300]}"
            if err.code == 404 and "RESOURCE_DOES_NOT_EXIST" in body:
                raise NotFound(body[:300]) from None
            if err.code == 404:
                raise NoEndpoint(message) from None
            if err.code < 500 or attempt == RETRIES:
                raise RuntimeError(message) from None
        except (urllib.error.URLError, OSError) as err:
            if attempt == RETRIES:
                raise ConnectionError(f"MLflow at {uri} does not answer: {err}") from err
        time.sleep(1.0 + attempt)
    raise AssertionError("unreachable")
