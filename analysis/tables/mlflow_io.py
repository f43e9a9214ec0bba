"""Read a study's runs from MLflow and write the analysis back to the study's parent run.

Follows the MLflow run contract (`foundation.contract`): cells are runs tagged
``study=<name>``; the parent run carries ``scaling.role=study``. Imported lazily: only MLflow
users pay for it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analysis.tables.runs import is_eval_column
from analysis.tables.study_table import effective_digest, run_record, run_state, run_table
from foundation import contract, mlflow_rest
from foundation.run_pages import client_pages
from foundation.studypaths import missing_store, missing_store_message

_client = contract.make_client


def _status(run) -> str:
    """The run's state by the study table's one mapping (``study_table.run_state``)."""
    has_loss = contract.FINAL_VAL_LOSS in run.data.metrics
    return run_state(run.info.status, run.data.tags.get(contract.TAG_OUTCOME), has_loss)


def _budget(run, seen: float) -> float:
    """The run's token budget D: what it trained (``tokens``), except for a diverged run, which
    stopped short of its budget: its planned one (a branch's tag, else the logged config's
    ``train.steps`` x tokens per step). A diverged run is evidence at its cell's LR and budget;
    read at the tokens it reached it would form a budget of its own, and its cell's LR frontier
    would never see it (a gap, not the bound it is)."""
    if _status(run) != contract.DIVERGED:
        return seen
    branch = run.data.tags.get(contract.TAG_BRANCH_TOKENS)
    if branch:
        return float(branch)
    params = run.data.params
    try:
        steps, batch = int(params["train.steps"]), int(params["train.global_batch_tokens"])
        seq = int(params.get("model.seq_length", 1))
    except (KeyError, ValueError):
        return seen  # no config logged: the tokens it reached are all there is
    return float(steps * (batch // seq) * seq)


def _digest(tags: dict) -> str:
    """The model code the run's result stands for (``study_table.effective_digest``)."""
    return effective_digest(
        tags.get(contract.TAG_CODE_DIGEST), tags.get(contract.TAG_CODE_ACCEPTED)
    )


def load_study_runs(
    tracking_uri: str, experiment: str, study: str
) -> tuple[pd.DataFrame, str | None]:
    """(run table, parent run id or None) for every cell of ``study`` in ``experiment``.

    Runs tagged ``scaling.cell_kind = stable`` (a WSD run's warmup and stable phase) are left
    out: their branches, one per budget, are the measurements.
    """
    store = missing_store(tracking_uri)
    if store is not None:  # opening it would create an empty store (and hide the real one)
        raise ValueError(missing_store_message(store))
    client = _client(tracking_uri)
    exp_id = contract.experiment_id(client, experiment)
    if exp_id is None:
        raise ValueError(
            f"experiment {experiment!r} not found at {tracking_uri}; check the study's "
            "mlflow.experiment and mlflow.tracking_uri"
        )
    quoted = study.replace("'", "\\'")
    runs = search_study_runs(
        tracking_uri, client, exp_id, f"tags.{contract.TAG_STUDY} = '{quoted}'"
    )
    parents = [r for r in runs if r.data.tags.get(contract.TAG_ROLE) == contract.ROLE_STUDY]
    cells = [r for r in runs if r.data.tags.get(contract.TAG_ROLE) != contract.ROLE_STUDY]
    # a WSD stable run is the trunk its branches fork from, not a measurement
    stable = [r for r in cells if r.data.tags.get(contract.TAG_CELL_KIND) == contract.KIND_STABLE]
    cells = [r for r in cells if r.data.tags.get(contract.TAG_CELL_KIND) != contract.KIND_STABLE]
    if not parents:  # the parent may carry only the role tag and the study name as run name
        role = search_study_runs(
            tracking_uri, client, exp_id, f"tags.`{contract.TAG_ROLE}` = '{contract.ROLE_STUDY}'"
        )
        parents = [r for r in role if r.info.run_name == study]
    if not cells and stable:
        raise ValueError(
            f"study {study!r} has {len(stable)} stable (WSD trunk) run(s) and no branch yet; "
            "the analysis reads branches: run `scaling status` and wait for them"
        )
    if not cells:
        raise ValueError(
            f"no runs tagged study={study!r} in experiment {experiment!r} at {tracking_uri}; "
            "check the study name (its `name` key) or run `scaling status`"
        )
    rows = study_rows(cells, study)
    # a re-submitted study may have left a second parent; the first created is the study's
    parent_id = min(parents, key=lambda r: r.info.start_time).info.run_id if parents else None
    return run_table(rows, f"study {study!r} in MLflow"), parent_id


@dataclass(frozen=True)
class _RunInfo:
    run_id: str
    status: str
    start_time: int
    run_name: str


@dataclass(frozen=True)
class _RunData:
    tags: dict[str, str]
    metrics: dict[str, float]
    params: dict[str, str]  # a diverged run's planned budget is read from its config (`_budget`)


@dataclass(frozen=True)
class RestRun:
    """The parts of an MLflow ``Run`` the study table reads (``info.run_id``, ``info.status``,
    ``info.start_time``, ``info.run_name``, ``data.tags``, ``data.metrics``, ``data.params``),
    from the REST search's JSON: read as a ``Run`` is, without building one."""

    info: _RunInfo
    data: _RunData


def _rest_run(run: dict) -> RestRun:
    info, data = run["info"], run.get("data", {})
    return RestRun(
        _RunInfo(
            info["run_id"],
            info.get("status", "RUNNING"),
            int(info.get("start_time", 0)),
            info.get("run_name", ""),
        ),
        _RunData(
            {t["key"]: t.get("value", "") for t in data.get("tags", [])},
            {m["key"]: float(m.get("value", 0.0)) for m in data.get("metrics", [])},
            {p["key"]: p.get("value", "") for p in data.get("params", [])},
        ),
    )


def search_study_runs(
    tracking_uri: str, client, exp_id: str, filter_string: str, rest: bool | None = None
) -> list:
    """Every run of ``exp_id`` matching ``filter_string``. Against an HTTP(S) server (or
    ``rest=True``) through the REST API (``foundation.mlflow_rest``): plain ``RestRun``
    records, without the client's protobuf entities (10 s of CPU at 10,000 runs); else
    (``rest=False``, or another store) through ``client``. Either way each run once, from one
    consistent view of the pages (``foundation.run_pages``): a run created between two pages
    once made 8 runs 11."""
    if rest is None:
        rest = mlflow_rest.is_http(tracking_uri)
    if not rest:
        return client_pages(client, exp_id, filter_string)
    return [_rest_run(r) for r in mlflow_rest.search_runs(tracking_uri, exp_id, filter_string)]


def study_rows(cells: list, study: str) -> list[dict]:
    """``run_record`` rows of a study's cell runs (MLflow ``Run`` entities, the parent and WSD
    stable runs left out): the report's side of the one run table."""
    rows, unstarted = [], []
    for run in cells:
        tags, metrics = run.data.tags, run.data.metrics
        missing = [k for k in (contract.TAG_VARIANT, contract.TAG_SEED) if k not in tags]
        num_nonembedding = contract.summary_metric(metrics, contract.NUM_NONEMBEDDING_PARAMS)
        num_total = contract.summary_metric(metrics, contract.NUM_PARAMS_TOTAL)
        sized = num_nonembedding is not None and contract.TOKENS in metrics
        ended = contract.run_status_state(run.info.status) in (contract.FAILED, contract.CANCELLED)
        if not missing and not sized and ended:
            unstarted.append(run)  # ended before it logged its size: sized from its arm below
            continue
        missing += [] if num_nonembedding is not None else [contract.NUM_NONEMBEDDING_PARAMS]
        missing += [] if contract.TOKENS in metrics else [contract.TOKENS]
        if missing:
            raise ValueError(
                f"run {run.info.run_id} of study {study!r} lacks {', '.join(missing)}; "
                "every cell must log the tags and metrics of docs/interfaces.md"
            )
        rows.append(
            run_record(
                variant=tags[contract.TAG_VARIANT],
                size=tags.get(contract.TAG_SIZE),
                num_nonembedding_params=num_nonembedding,
                num_params_total=num_total,
                tokens=_budget(run, metrics[contract.TOKENS]),
                flops=metrics.get(contract.FLOPS),
                flops_counted=tags.get(contract.TAG_FLOPS_COUNTED),
                code_digest=_digest(tags),
                seed=tags[contract.TAG_SEED],
                lr=tags.get(contract.TAG_LR),
                final_val_loss=metrics.get(contract.FINAL_VAL_LOSS),
                select_val_loss=metrics.get(contract.FINAL_SELECT_LOSS),
                status=_status(run),
                run_id=run.info.run_id,
                **{k: v for k, v in metrics.items() if is_eval_column(k)},
            )
        )
    return rows + _unstarted_rows(unstarted, rows)


def _unstarted_rows(runs: list, rows: list[dict]) -> list[dict]:
    """Failed rows for failed or cancelled runs that never logged their size (a job that
    crashed, a branch whose parent failed, a cell `submit` gave up on): the parameter counts
    are those of a run of the same variant and size, the tokens its branch budget's or that
    run's, so the failed LR still counts in its arm's LR frontier. A run with no such sibling
    tells the analysis nothing and is left out.

    The run table calls such a row failed even when its run was KILLED (cancelled): it holds
    no measurement of its own, only the LR that was tried, and its size is borrowed."""
    sized = {(r["variant"], r["size"]): r for r in rows}
    out = []
    for run in runs:
        tags = run.data.tags
        sibling = sized.get((tags[contract.TAG_VARIANT], tags.get(contract.TAG_SIZE)))
        if sibling is None:
            continue
        budget = tags.get(contract.TAG_BRANCH_TOKENS)
        out.append(
            run_record(
                **{k: sibling[k] for k in ("variant", "size", "num_nonembedding_params")},
                num_params_total=sibling["num_params_total"],
                tokens=float(budget) if budget else sibling["tokens"],
                flops=None,  # estimated from N and D
                flops_counted=sibling["flops_counted"],
                code_digest=_digest(tags),
                seed=tags[contract.TAG_SEED],
                lr=tags.get(contract.TAG_LR),
                final_val_loss=None,
                select_val_loss=None,
                status=contract.FAILED,
                run_id=run.info.run_id,
            )
        )
    return out


CURVE_KEYS = (contract.TRAIN_LOSS, contract.VAL_LOSS)  # per-step metrics of the MLflow contract


def load_curves(
    tracking_uri: str,
    run_ids: list[str],
    keys: tuple[str, ...] = CURVE_KEYS,
    workers: int = 8,
    bulk: bool | None = None,
) -> dict[str, dict[str, tuple[list[int], list[float]]]]:
    """``run_id -> {key: (steps, values)}`` of per-step metrics, for the training-curve plots,
    in ``run_ids`` order. Runs or keys with no history are left out.

    Against an HTTP(S) server (``bulk`` None or True) the histories of 100 runs come in one
    request (``_curves_bulk``); else, or on a server without that endpoint, one
    ``get_metric_history`` per run and key (``_curves_per_run``). Both give the same points in
    the same order. Requests go ``workers`` at a time in threads."""
    if bulk is None:
        bulk = mlflow_rest.is_http(tracking_uri)
    if bulk:
        try:
            return _curves_bulk(tracking_uri, run_ids, keys, workers)
        except mlflow_rest.NoEndpoint:
            pass  # a server older than the endpoint: one request per run
    return _curves_per_run(tracking_uri, run_ids, keys, workers)


def _full_history(client, run_id: str, key: str) -> tuple[list[int], list[float]] | None:
    """Every point of ``key`` in ``run_id``, by step (``get_metric_history`` pages itself)."""
    history = sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)
    return ([m.step for m in history], [m.value for m in history]) if history else None


def _curves_per_run(
    tracking_uri: str, run_ids: list[str], keys: tuple[str, ...], workers: int
) -> dict[str, dict[str, tuple[list[int], list[float]]]]:
    """``load_curves`` by one ``get_metric_history`` per run and key (any store)."""
    client = _client(tracking_uri)

    def one(run_id: str) -> tuple[str, dict]:
        out = {}
        for key in keys:
            got = _full_history(client, run_id, key)
            if got is not None:
                out[key] = got
        return run_id, out

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(run_ids)))) as pool:
        return {rid: got for rid, got in pool.map(one, run_ids) if got}


def _curves_bulk(
    tracking_uri: str, run_ids: list[str], keys: tuple[str, ...], workers: int
) -> dict[str, dict[str, tuple[list[int], list[float]]]]:
    """``load_curves`` through ``metrics/get-history-bulk`` (``foundation.mlflow_rest``): one
    request and one SQL query per 100 runs and key, instead of one request per run and key (at
    3,300 drawn runs, 68 requests for 6,700). The server returns each run's points in
    ``get_metric_history``'s order, sorted here by step as the per-run path sorts them; an
    answer cut at the server's 25,000 points is asked again in halves, and a single run's
    history that long is read run by run."""
    size = mlflow_rest.BULK_RUNS
    tasks = [(run_ids[i : i + size], key) for key in keys for i in range(0, len(run_ids), size)]
    client = None  # made only if one history alone fills an answer

    def one(task: tuple[list[str], str]) -> tuple[str, dict[str, tuple[list, list]]]:
        nonlocal client
        chunk, key = task
        histories, whole = mlflow_rest.metric_histories(tracking_uri, chunk, key)
        if whole:
            return key, {rid: _by_step(points) for rid, points in histories.items()}
        if len(chunk) > 1:
            half = len(chunk) // 2
            return key, {**one((chunk[:half], key))[1], **one((chunk[half:], key))[1]}
        client = client or _client(tracking_uri)
        full = _full_history(client, chunk[0], key)
        return key, {} if full is None else {chunk[0]: full}

    got: dict[str, dict[str, tuple[list[int], list[float]]]] = {rid: {} for rid in run_ids}
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(tasks)))) as pool:
        for key, histories in pool.map(one, tasks):
            for run_id, history in histories.items():
                got[run_id][key] = history
    return {rid: {k: got[rid][k] for k in keys if k in got[rid]} for rid in run_ids if got.get(rid)}


def _by_step(points: list[dict]) -> tuple[list[int], list[float]]:
    """(steps, values) of a REST history, sorted by step (stable: timestamp order kept)."""
    points = sorted(points, key=lambda p: int(p.get("step", 0)))
    return [int(p.get("step", 0)) for p in points], [float(p.get("value", 0.0)) for p in points]


def log_to_parent(tracking_uri: str | None, parent_run_id: str, out_dir: Path) -> None:
    """Attach the report, plots and verdict to the study's parent run under ``analysis/``."""
    # mlflow is imported only when something is logged: a CSV analysis never pays for it
    import mlflow

    client = _client(tracking_uri or mlflow.get_tracking_uri())
    client.log_artifacts(parent_run_id, str(out_dir), artifact_path="analysis")
