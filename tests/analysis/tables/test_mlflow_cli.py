"""`scaling analyze` end to end: a study read from a real MLflow server, and a run CSV."""

from __future__ import annotations

import json
import math
import uuid

import numpy as np
import pytest
import yaml
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from analysis.judgement import table_judgement
from analysis.synthetic.studies import Effect, make_study
from analysis.tables.mlflow_io import load_curves, load_study_runs
from scaling.cli import app as scaling_app

STUDY = {"linear": Effect(), "nonlinear": Effect(k0=1.5)}
SIZES = (2e6, 5e6, 1e7, 2e7)
VERDICT_KEYS = {"variant", "verdict", "k0", "k0_ci95", "gamma", "gamma_ci95"}
VERDICT_KEYS |= {"gain_pct_by_size", "extrapolated_gain_pct"}
TRAIN_STEPS = 200
LOG_INTERVAL = 5  # train/loss every 5 steps, as `train.log_interval: 5` logs it


def _cli():
    app = scaling_app  # the `scaling` command itself
    return app


def _log_cell(client, exp_id, parent_id, study, row, status="FINISHED", outcome="completed"):
    tags = {
        "study": study,
        "mlflow.parentRunId": parent_id,
        "variant": row["variant"],
        "size": row["size"],
        "seed": str(row["seed"]),
        "lr": "0.001",
        "outcome": outcome,
    }
    run = client.create_run(exp_id, tags=tags, run_name=f"{row['variant']}-{row['size']}")
    rid = run.info.run_id
    n = row["num_nonembedding_params"]
    # the old metric names for one arm, the new ones for the other: readers accept both
    summary = {
        ("n_params" if row["variant"] == "linear" else "num_params_total"): n * 1.1,
        ("n_nonembedding_params" if row["variant"] == "linear" else "num_nonembedding_params"): n,
        "tokens": row["tokens"],
        "flops": row["flops"],
    }
    if not math.isnan(row["final_val_loss"]):
        summary["final_val_loss"] = row["final_val_loss"]
        summary["final_select_loss"] = row["final_val_loss"] + 0.01  # the LR-selection windows
    metrics = [Metric(k, v, 0, 0) for k, v in summary.items()]
    # a validation curve every 50 steps and the training loss every log interval, as a
    # trainer logs them, ending at the final loss: the training-curve plot reads both
    loss = row["final_val_loss"]
    metrics += [Metric("val/loss", loss + 50.0 / s, 0, s) for s in range(50, 201, 50)]
    logged = range(LOG_INTERVAL, TRAIN_STEPS + 1, LOG_INTERVAL)
    metrics += [Metric("train/loss", loss + 50.0 / s + 0.01 * (s % 2), 0, s) for s in logged]
    for i in range(0, len(metrics), 1000):  # log_batch takes at most 1000 metrics
        client.log_batch(rid, metrics=metrics[i : i + 1000])
    client.set_terminated(rid, status)
    return rid


@pytest.fixture(scope="module")
def study(mlflow_server, tmp_path_factory):
    """A 4-size, 3-seed study in MLflow plus one failed and one diverged cell."""
    client = MlflowClient(tracking_uri=mlflow_server)
    name = f"analysis_test_study_{uuid.uuid4().hex[:8]}"  # the server outlives one test run
    exp_id = client.create_experiment(f"exp_{name}")
    parent = client.create_run(exp_id, tags={"scaling.role": "study", "study": name})
    table = make_study(STUDY, sizes=SIZES, num_seeds=3)
    ids = [_log_cell(client, exp_id, parent.info.run_id, name, r) for _, r in table.iterrows()]
    bad = table.iloc[0].to_dict() | {"seed": 7}
    failed = _log_cell(client, exp_id, parent.info.run_id, name, bad, status="FAILED")
    # a diverged cell stops short of its budget: it logs the tokens it reached (3/8 of them)
    # and its config (40,000 steps x 1,000 tokens = the 4e7-token budget of its cell)
    short = bad | {"seed": 8, "tokens": 0.375 * bad["tokens"]}
    diverged = _log_cell(client, exp_id, parent.info.run_id, name, short, "FINISHED", "diverged")
    for key, value in (("train.steps", 40000), ("train.global_batch_tokens", 1000)):
        client.log_param(diverged, key, value)
    client.log_param(diverged, "model.seq_length", 500)
    other = client.create_run(exp_id, tags={"study": "another_study"})  # must not be read
    client.set_terminated(other.info.run_id)
    spec = tmp_path_factory.mktemp("spec") / "study.yaml"
    spec.write_text(
        yaml.safe_dump(
            {"name": name, "mlflow": {"experiment": f"exp_{name}", "tracking_uri": mlflow_server}}
        )
    )
    return {
        "uri": mlflow_server,
        "name": name,
        "parent": parent.info.run_id,
        "cells": ids,
        "failed": failed,
        "diverged": diverged,
        "spec": spec,
        "table": table,
    }


def test_load_study_reads_the_contract(study):
    table, parent = load_study_runs(study["uri"], f"exp_{study['name']}", study["name"])
    assert parent == study["parent"]
    assert len(table) == len(study["cells"]) + 2
    status = dict(zip(table["run_id"], table["status"], strict=True))
    assert status[study["failed"]] == "failed" and status[study["diverged"]] == "diverged"
    # the diverged run counts at its cell's budget (censored evidence there), not at the 1.5e7
    # tokens it reached, which would have made a budget of its own that no frontier reads
    tokens = dict(zip(table["run_id"], table["tokens"], strict=True))
    assert study["table"].iloc[0]["tokens"] == 4e7 and tokens[study["diverged"]] == 4e7
    assert all(status[r] == "completed" for r in study["cells"])
    one = table[table["run_id"] == study["cells"][0]].iloc[0]
    src = study["table"].iloc[0]
    assert one["num_nonembedding_params"] == src["num_nonembedding_params"]
    assert one["num_params_total"] == pytest.approx(src["num_nonembedding_params"] * 1.1)
    assert one["final_val_loss"] == pytest.approx(src["final_val_loss"])
    assert one["select_val_loss"] == pytest.approx(src["final_val_loss"] + 0.01)
    assert one["lr"] == 0.001 and one["size"] == src["size"]


def test_load_curves_reads_every_logged_step_of_train_and_val_loss(study):
    ids = study["cells"][:5]
    curves = load_curves(study["uri"], ids + [study["failed"]])
    assert set(ids) <= set(curves)
    for rid in ids:
        steps, values = curves[rid]["train/loss"]
        assert steps == list(range(LOG_INTERVAL, TRAIN_STEPS + 1, LOG_INTERVAL))
        assert len(values) == TRAIN_STEPS // LOG_INTERVAL
        assert curves[rid]["val/loss"][0] == [50, 100, 150, 200]


def test_the_rest_reads_equal_the_clients_per_run_reads(study, monkeypatch):
    """Issue 53: at 10,000 runs `scaling analyze` reads the study through MLflow's REST API
    (`runs/search` as plain JSON, the histories of 100 runs per `get-history-bulk`): the
    same table, parent and curves, point for point and in order, as the MLflow client's pages
    and one `get_metric_history` per run and key. An answer cut at the server's cap on points
    is asked again in halves, down to one run read in full (the cap lowered here, so that
    the cut happens on a few runs); a resumed run's repeated steps keep their order."""
    import pandas as pd

    from foundation import mlflow_rest

    client = MlflowClient(tracking_uri=study["uri"])
    exp_id = client.get_experiment_by_name(f"exp_{study['name']}").experiment_id
    long = client.create_run(exp_id, tags={"study": "curves_only"}).info.run_id
    points = [Metric("train/loss", 5.0 - s / 1e4, 1000 + s, s) for s in range(2600)]
    for i in range(0, len(points), 1000):
        client.log_batch(long, metrics=points[i : i + 1000])
    resumed = client.create_run(exp_id, tags={"study": "curves_only"}).info.run_id
    again = [Metric("train/loss", 4.0 + s, 10 + t, s) for t in (0, 5) for s in range(10, 0, -1)]
    client.log_batch(resumed, metrics=again + [Metric("val/loss", 3.0, 1, 10)])
    calls: list[str] = []
    real = mlflow_rest.call
    monkeypatch.setattr(mlflow_rest, "call", lambda *a, **k: calls.append(a[2]) or real(*a, **k))

    ids = study["cells"] + [study["failed"], long, resumed]
    fast = load_curves(study["uri"], ids)
    assert calls.count("metrics/get-history-bulk") == 2 * math.ceil(len(ids) / 100)
    per_run = load_curves(study["uri"], ids, bulk=False)
    assert list(fast) == list(per_run) and fast == per_run
    assert fast[long]["train/loss"][0] == list(range(2600))
    assert fast[resumed]["train/loss"][0] == [s for s in range(1, 11) for _ in (0, 5)]
    monkeypatch.setattr(mlflow_rest, "BULK_POINTS", 150)  # 40 points a cell: cut answers
    calls.clear()
    assert load_curves(study["uri"], ids) == per_run
    assert calls.count("metrics/get-history-bulk") > 2 * math.ceil(len(ids) / 100)

    table, parent = load_study_runs(study["uri"], f"exp_{study['name']}", study["name"])
    assert "runs/search" in calls
    monkeypatch.setattr(mlflow_rest, "is_http", lambda uri: False)  # the client's pages
    by_client, parent_by_client = load_study_runs(
        study["uri"], f"exp_{study['name']}", study["name"]
    )
    assert parent == parent_by_client == study["parent"]
    pd.testing.assert_frame_equal(table, by_client)


def test_the_training_curve_plot_draws_every_logged_step_smoothed(study):
    """Issue 12: per run, the training loss at every log interval (not 2 points), its EMA,
    and the validation points; histories read only for the runs drawn."""
    from analysis.report.training_curves import chosen_runs, curve_series, ema
    from analysis.stats.analyze import analyse

    table, _ = load_study_runs(study["uri"], f"exp_{study['name']}", study["name"])
    an = analyse(table, table_judgement("linear", num_resamples=0))
    drawn = list(chosen_runs(an)["run_id"])
    assert set(drawn) <= set(study["cells"]) and study["failed"] not in drawn
    series = curve_series(an, load_curves(study["uri"], drawn))
    assert list(series) == ["2M", "5M", "10M", "20M"]  # ascending N
    entries = [e for size in series.values() for e in size]
    assert len(entries) == len(drawn) > 0
    for e in entries:
        steps = list(range(LOG_INTERVAL, TRAIN_STEPS + 1, LOG_INTERVAL))
        assert e["train_steps"].tolist() == steps and len(e["train_loss"]) == len(steps)
        assert np.allclose(e["train_ema"], ema(e["train_loss"]))
        # smoothed: the EMA wiggles less than the raw curve's step-to-step alternation
        assert (
            np.abs(np.diff(e["train_ema"][-10:])).max()
            < np.abs(np.diff(e["train_loss"][-10:])).max()
        )
        assert e["val_steps"].tolist() == [50, 100, 150, 200]


def test_noise_from_a_finished_study_in_mlflow(study):
    from analysis import noise_from_source, power_table

    got = noise_from_source(str(study["spec"]), baseline="linear")
    # the 2M linear cell lost a seed (failed, diverged): that size pairs on nothing usable and
    # falls back to the noise model; every other size is the paired sd of its 3 seeds
    assert list(got) == ["2M", "5M", "10M", "20M"] and all(v > 0 for v in got.values())
    rows = power_table(got, num_seeds=3, target_gain=1.0)
    assert [r["size"] for r in rows] == list(got) and all(r["mde_pct"] > 0 for r in rows)


def test_missing_study_names_what_to_check(study):
    with pytest.raises(ValueError, match="no runs tagged study='nope'"):
        load_study_runs(study["uri"], f"exp_{study['name']}", "nope")
    with pytest.raises(ValueError, match="experiment 'no_such_exp' not found"):
        load_study_runs(study["uri"], "no_such_exp", study["name"])


def test_cli_study_runs_named_by_hand_go_to_out_and_never_to_the_parent(study, tmp_path):
    """Without a study file its looks, LR search and level are unknown: the runs are judged as
    a table, written to --out, and nothing is logged to the study's parent run."""
    out = tmp_path / "out"
    source = ["--tracking-uri", study["uri"], "--experiment", f"exp_{study['name']}"]
    args = ["analyze", *source, "--study-name", study["name"], "--out", str(out)]
    res = CliRunner().invoke(_cli(), [*args, "--resamples", "50"])
    assert res.exit_code == 0, res.output
    verdict = json.loads((out / "verdict.json").read_text())
    (variant,) = verdict["variants"]
    assert VERDICT_KEYS <= set(variant) and "reanalysis" not in verdict
    # every cell ran at one LR (0.001): no arm's LR is bracketed, so no claim can be made
    assert variant["verdict"] == "inconclusive", variant["reason"]
    assert "LR not bracketed" in variant["reason"] and "add LR 0.0005, 0.002" in variant["reason"]
    reasons = {r["run_id"]: r["reason"] for r in verdict["excluded_runs"]}
    assert reasons[study["failed"]] == "failed" and reasons[study["diverged"]] == "diverged"
    # the failed and diverged seeds make their cell's LR unusable: its other seeds are listed
    # too, never used as survivors
    survivors = set(reasons) - {study["failed"], study["diverged"]}
    assert len(survivors) == 3 and all("lost a seed" in reasons[r] for r in survivors)
    for name in ("report.html", "report.md", "loss_vs_n.svg", "training_curves.png"):
        assert (out / name).is_file(), name
    html = (out / "report.html").read_text()
    assert "data:image/png;base64," in html and "Excluded runs" in html
    assert "Training loss at every logged step" in html and "No training curves" not in html
    client = MlflowClient(tracking_uri=study["uri"])
    assert client.list_artifacts(study["parent"], "analysis") == []  # not the study's verdict


def test_cli_a_study_spec_the_loader_refuses_is_one_line(tmp_path):
    """`scaling analyze STUDY` reads the study with `scaling run`'s loader: a spec it refuses is
    refused as `run` refuses it (one `error:`, then a line per missing field, each naming the
    file), exit 2, nothing written."""
    from scaling.cli import app

    spec = tmp_path / "study.yaml"
    spec.write_text(yaml.safe_dump({"name": "s"}))
    res = CliRunner().invoke(app, ["analyze", str(spec), "--out", str(tmp_path / "o")])
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2 and lines[0].startswith(f"error: {spec}: "), res.output
    assert all(line.removeprefix("error: ").startswith(f"{spec}: ") for line in lines)
    assert any("study.mlflow: required field is missing" in line for line in lines), lines
    assert "Traceback" not in res.output
    assert not (tmp_path / "o").exists()


def test_cli_runs_csv(tmp_path):
    csv = tmp_path / "runs.csv"
    make_study({"base": Effect(), "v": Effect(k0=1.3)}, sizes=SIZES, num_seeds=2).to_csv(csv)
    out = tmp_path / "out"
    args = ["analyze", "--runs-csv", str(csv), "--out", str(out), "--resamples", "30"]
    res = CliRunner().invoke(_cli(), [*args, "--baseline", "linear"])
    assert res.exit_code == 2 and "--baseline 'linear' is not a variant" in res.output
    assert "Traceback" not in res.output
    assert not out.exists()  # refused before anything was written
    res = CliRunner().invoke(_cli(), [*args, "--baseline", "base", "--margin", "0"])
    assert res.exit_code == 2 and "verdict.margin_pct" in res.output and "--margin" in res.output
    assert not out.exists()
    res = CliRunner().invoke(_cli(), [*args, "--baseline", "base", "--margin", "0.8"])
    assert res.exit_code == 0, res.output
    verdict = json.loads((out / "verdict.json").read_text())
    (variant,) = verdict["variants"]
    assert VERDICT_KEYS <= set(variant) and variant["variant"] == "v"
    assert verdict["margin_pct"] == 0.8 and variant["decision"]["margin_pct"] == 0.8


def test_one_builder_sets_the_defaults_and_a_sequential_judgement_takes_its_looks():
    """`analysis.judgement.table_judgement`: the one margin default and level fallback; with
    looks.json the design's margin and the last look's level, whatever was passed."""
    from analysis.judgement import table_judgement
    from analysis.stats.gains.levels import ALPHA
    from analysis.tables.spec import DEFAULT_MARGIN_PCT

    plain = table_judgement("linear, linear_qknorm")
    assert plain.baselines == ("linear", "linear_qknorm") and plain.primary == "linear"
    assert (plain.margin_pct, plain.alpha, plain.level) == (DEFAULT_MARGIN_PCT, ALPHA, ALPHA)
    design = {"start": 3, "max": 7, "step": 2, "margin_pct": 0.25, "alpha": 0.1}
    look = dict.fromkeys(("num_paired_top", "info_fraction", "z", "verdict", "stop", "reason"), 0)
    looks = {"design": design, "looks": [{**look, "look": 1, "level": 0.004}]}
    seq = table_judgement("linear", margin_pct=0.9, alpha=0.2, looks=looks)
    assert (seq.margin_pct, seq.alpha, seq.level) == (0.25, 0.1, 0.004)
    assert seq.design is not None and seq.design.num_looks == 3 and seq.sequential
    with pytest.raises(ValueError, match="--baseline is empty"):
        table_judgement(" , ")


@pytest.mark.parametrize(
    "edit, fragment",
    [
        (lambda f: f.drop(columns="tokens"), "missing required column(s) tokens"),
        (lambda f: f.assign(final_val_loss=["x"] + [1.0] * (len(f) - 1)),
         "column 'final_val_loss' row 1 is 'x', not a number"),
    ],
)  # fmt: skip
def test_cli_bad_csv_is_one_line_naming_file_column_and_row(tmp_path, edit, fragment):
    csv = tmp_path / "runs.csv"
    edit(make_study(STUDY, sizes=SIZES, num_seeds=3)).to_csv(csv, index=False)
    res = CliRunner().invoke(_cli(), ["analyze", "--runs-csv", str(csv), "--out", str(tmp_path)])
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and str(csv) in lines[0], res.output
