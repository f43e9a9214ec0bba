"""MLflow's REST API, called directly: no mlflow import and no protobuf entities.

At 10,000 runs the MLflow client costs more than the server: importing mlflow (~1.4 s of CPU),
turning each page of `runs/search` into protobuf entities (every run with its ~60 params), and
one `get-history` round trip per run and metric for the training curves. Against an HTTP(S)
server, `call` posts the same requests the client does and keeps the JSON as plain dicts;
`search_runs` pages `runs/search` (at the page size that costs the server least) as one
consistent view (`foundation.run_pages`), and `metric_histories` reads the histories of up to
`BULK_RUNS` runs per request (`metrics/get-history-bulk`).

Credentials and TLS come from MLflow's own environment variables, so a server behind
authentication answers here as it does to MLflow; a `user:password@` in the URI is sent as
HTTP basic auth and never shown (`foundation.secrets`). Other stores (SQLite, a database URI)
keep going through the MLflow client, in their callers.

What a server may answer is checked, not trusted: an HTTP 5xx, a dropped connection, an answer
cut short or not whole within `MLFLOW_HTTP_REQUEST_TIMEOUT` seconds (the whole request, not
each read: a server that trickles a byte a second is given up on), an HTML page, JSON that does
not parse or lacks what a search returns, are all glitches: retried `RETRIES` times, waiting
`SCALING_TRACKING_BACKOFF_S` seconds (1) and doubling. What outlasts that is one
`TrackingUnavailable` line naming the server (its login masked), the fault and the fix.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from foundation.config import seconds_from_env
from foundation.http_exchange import Glitch, send
from foundation.run_pages import RunsMoved, read_all
from foundation.secrets import Credentials, mask_userinfo, redact_uri, split_uri_credentials

__all__ = [
    "NotFound",
    "NoEndpoint",
    "TrackingError",
    "TrackingUnavailable",
    "is_http",
    "call",
    "experiment_id",
    "search_runs",
    "metric_histories",
    "SEARCH_PAGE",
    "BULK_RUNS",
    "BULK_POINTS",
    "TIMEOUT_ENV",
    "BACKOFF_ENV",
    "request_timeout_s",
    "backoff_s",
]

# Runs per `runs/search` page. The server accepts up to 50,000, but its time per page grows
# faster than the page (MLflow 3.17 on PostgreSQL, 10,008 runs: 500 runs 0.7 s, 1,000 2.3 s,
# 2,000 7.7 s, 5,000 28.9 s), and a 10,000-run page outlasted the client's 20 s request
# timeout under load: pages of 1,000 (as MLflow's own client pages) cost the least in all.
SEARCH_PAGE = 1000
BULK_RUNS = 100  # run ids per get-history-bulk request (the server's limit)
BULK_POINTS = 25_000  # points per get-history-bulk answer, all runs together (the server's cap)
RETRIES = 3  # after the first try: waits of 1, 2 and 4 s, a restart's worth
TIMEOUT_ENV = "MLFLOW_HTTP_REQUEST_TIMEOUT"  # MLflow's own: seconds for one whole request
TIMEOUT_S = 120.0  # MLflow's default
BACKOFF_ENV = "SCALING_TRACKING_BACKOFF_S"  # the first wait before a retry (tests: 0)
BACKOFF_S = 1.0
_RETRIED = {408, 425, 429}  # 4xx answers that say "later", retried as a 5xx is


class NotFound(Exception):
    """The server says the resource does not exist (HTTP 404, RESOURCE_DOES_NOT_EXIST)."""


class NoEndpoint(RuntimeError):
    """HTTP 404 for the endpoint itself: a server older than the call, or a wrong base URI."""


class TrackingError(RuntimeError):
    """The tracking server refused a request (HTTP 4xx: a login, a permission, a bad query);
    str: one line naming the server, its login masked, the answer and the fix."""


class TrackingUnavailable(TrackingError):
    """The tracking server's glitches outlasted the retries, or its runs kept changing while a
    search read them; str: one line naming the server, its login masked, and the fault."""


def is_http(uri: str | None) -> bool:
    return bool(uri) and uri.startswith(("http://", "https://"))


def experiment_id(uri: str, experiment: str) -> str | None:
    """The id of the experiment named `experiment`; None if it does not exist."""
    try:
        found = call(
            uri,
            "GET",
            "experiments/get-by-name",
            {"experiment_name": experiment},
            check=_experiment_answer,
        )
    except NotFound:
        return None
    return found["experiment"]["experiment_id"]


def search_runs(uri: str, exp_id: str, filter_string: str, page: int | None = None) -> list[dict]:
    """Every active run of experiment `exp_id` matching `filter_string`, as the server's JSON
    (`{"info": {...}, "data": {"tags": [...], "metrics": [...], "params": [...]}}`), in pages
    of `page` runs (`SEARCH_PAGE`), each run once (`foundation.run_pages.read_all`)."""

    def fetch(token: str | None, max_results: int) -> tuple[list[dict], str | None]:
        body: dict[str, Any] = {
            "experiment_ids": [exp_id],
            "filter": filter_string,
            "max_results": max_results,
        }
        if token:
            body["page_token"] = token
        answer = call(uri, "POST", "runs/search", body, check=_runs_answer)
        return answer.get("runs", []), answer.get("next_page_token") or None

    where = f"the tracking server {redact_uri(uri)} (runs/search)"
    try:
        return read_all(fetch, lambda run: run["info"]["run_id"], page or SEARCH_PAGE, where)
    except RunsMoved as err:  # one exception for every fault of this server
        raise TrackingUnavailable(str(err)) from None


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
        check=_history_answer,
    )
    points = answer.get("metrics", [])
    out: dict[str, list[dict]] = {}
    for point in points:
        out.setdefault(point["run_id"], []).append(point)
    return out, len(points) < BULK_POINTS


def _headers(login: Credentials | None = None) -> dict[str, str]:
    """MLflow's: a token, else its username and password, else the URI's `login`."""
    headers = {"Content-Type": "application/json", "User-Agent": "scaling"}
    token = os.environ.get("MLFLOW_TRACKING_TOKEN")
    user, password = (os.environ.get(f"MLFLOW_TRACKING_{k}") for k in ("USERNAME", "PASSWORD"))
    if not (user and password) and login is not None:
        user, password = login.username, login.password
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
    uri: str,
    method: str,
    endpoint: str,
    payload: dict[str, Any],
    api: str = "api",
    check: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """One REST call to `<uri>/<api>/2.0/mlflow/<endpoint>`; a GET's list values are sent as
    repeated parameters. `check(answer)` raises ValueError for JSON that is not what the
    endpoint returns. A glitch (module docstring) is retried `RETRIES` times, then
    TrackingUnavailable; NotFound for a missing resource, NoEndpoint for a missing endpoint,
    TrackingError for another refusal; ConfigError for a bad `MLFLOW_HTTP_REQUEST_TIMEOUT`."""
    timeout, backoff = request_timeout_s(), backoff_s()
    base, login = split_uri_credentials(uri)
    where = f"the tracking server {redact_uri(uri)} ({endpoint})"
    url = f"{base.rstrip('/')}/{api}/2.0/mlflow/{endpoint}"
    data = None
    if method == "GET":
        url += "?" + urllib.parse.urlencode(payload, doseq=True)
    else:
        data = json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data, headers=_headers(login), method=method)
    for attempt in range(RETRIES + 1):
        if attempt:
            time.sleep(backoff * 2 ** (attempt - 1))
        try:
            answer = _answer(request, timeout, where)
            if check is not None:
                try:
                    check(answer)
                except (ValueError, TypeError, KeyError, AttributeError) as err:
                    raise Glitch(f"an answer that is not {endpoint}'s ({err})") from None
            return answer
        except Glitch as glitch:
            fault = str(glitch)
    raise TrackingUnavailable(
        _one_line(
            f"{where}: {fault}, {RETRIES + 1} tries; check that the server is up and "
            f"answers (raise {TIMEOUT_ENV} for a slow one), then run the command again"
        )
    )


def request_timeout_s() -> float:
    """`MLFLOW_HTTP_REQUEST_TIMEOUT`: the seconds one whole request may take (120);
    ConfigError naming the variable for a value that is not a positive number."""
    return seconds_from_env(
        TIMEOUT_ENV, TIMEOUT_S, "the seconds one request may take", positive=True
    )


def backoff_s() -> float:
    """`SCALING_TRACKING_BACKOFF_S`: the first wait before a retry (1 s), doubling after."""
    return seconds_from_env(BACKOFF_ENV, BACKOFF_S, "the first wait before a retry")


def _answer(request: urllib.request.Request, timeout: float, where: str) -> dict[str, Any]:
    """The JSON object the server answered `request` with, all within `timeout` seconds."""
    status, kind, body = send(request, timeout, _tls())
    text = body.decode(errors="replace")
    if status == 404 and "RESOURCE_DOES_NOT_EXIST" in text:
        raise NotFound(_one_line(text[:300]))
    if status == 404:
        raise NoEndpoint(_one_line(f"{where}: HTTP 404: {text[:300]}"))
    if status >= 500 or status in _RETRIED:
        raise Glitch(f"HTTP {status}")
    if status >= 400:
        raise TrackingError(
            _one_line(f"{where}: HTTP {status}: {text[:300]}; " + _refusal_fix(status))
        )
    if kind == "text/html":
        raise Glitch(f"an HTML page instead of JSON (HTTP {status}; a proxy's?)")
    try:
        answer = json.loads(body)
    except ValueError as err:  # cut short, garbled, or not UTF-8
        raise Glitch(f"an answer that is not JSON ({err})") from None
    if not isinstance(answer, dict):
        raise Glitch(f"an answer that is not a JSON object ({type(answer).__name__})")
    return answer


def _refusal_fix(status: int) -> str:
    if status == 401:
        return "fix the login (MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD)"
    if status == 403:
        return "ask the server's admin for permission to read the experiment"
    return "check the tracking URI and the study's mlflow section"


def _one_line(text: str) -> str:
    """`text` on one line, any login in it masked (a server's page may quote the URI)."""
    return mask_userinfo(" ".join(text.split()))


def _experiment_answer(answer: dict) -> None:
    experiment_id_ = answer["experiment"]["experiment_id"]
    if not isinstance(experiment_id_, str):
        raise TypeError(f"experiment_id {experiment_id_!r}")


def _runs_answer(answer: dict) -> None:
    """A `runs/search` page: each run with a string id and the tags, metrics and params the
    readers (`analysis.tables.mlflow_io`, `scaling.state.run_search`) turn into records."""
    token = answer.get("next_page_token")
    if token is not None and not isinstance(token, str):
        raise TypeError(f"next_page_token {token!r}")
    runs = answer.get("runs", [])
    if not isinstance(runs, list):
        raise TypeError("runs is not a list")
    for run in runs:
        info, data = run["info"], run.get("data", {})
        if not isinstance(info["run_id"], str) or not isinstance(data, dict):
            raise TypeError(f"run {info['run_id']!r}")
        if not all(isinstance(info.get(k, ""), str) for k in ("status", "run_name")):
            raise TypeError(f"run {info['run_id']!r}: status or name")
        int(info.get("start_time", 0))
        for part in ("tags", "params"):
            for item in data.get(part, []):
                if not isinstance(item["key"], str) or not isinstance(item.get("value", ""), str):
                    raise TypeError(f"{part} {item!r}")
        for metric in data.get("metrics", []):
            if not isinstance(metric["key"], str):
                raise TypeError(f"metric {metric!r}")
            float(metric["value"])


def _history_answer(answer: dict) -> None:
    points = answer.get("metrics", [])
    if not isinstance(points, list):
        raise TypeError("metrics is not a list")
    for point in points:
        if not isinstance(point["run_id"], str):
            raise TypeError(f"run_id {point['run_id']!r}")
        int(point.get("step", 0))
        float(point.get("value", 0.0))
