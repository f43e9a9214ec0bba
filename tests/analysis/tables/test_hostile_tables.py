"""Bad run tables (issue 55, items 5, 6, 7 and 17): a header only, infinite tokens, a negative
LR or loss, a row given twice, 10^6 rows, an arm whose every run diverged. Each is one `error:`
line naming the file, column and row (exit 2, nothing written), or a verdict line that says
why an arm has no verdict; never a traceback or an arm silently dropped."""

from __future__ import annotations

import uuid

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from analysis.judgement import table_judgement
from analysis.report.terminal import verdict_lines
from analysis.stats.analyze import analyse
from analysis.synthetic.studies import Effect, make_study
from analysis.tables.mlflow_io import load_study_runs
from analysis.tables.runs import MAX_RUNS, load_csv
from foundation import contract
from scaling.cli import app as scaling_app

STUDY = {"linear": Effect(), "nonlinear": Effect(k0=1.5)}
SIZES = (2e6, 5e6, 1e7, 2e7)


def _cli():
    app = scaling_app  # the `scaling` command itself
    return app


def _table() -> pd.DataFrame:
    return make_study(STUDY, sizes=SIZES, num_seeds=3)


def _set(column: str, value, row: int = 3):
    def edit(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.copy()
        frame[column] = frame[column].astype(object)
        frame.loc[row, column] = value
        return frame

    return edit


BAD_TABLES = {
    "header only": (lambda f: f.iloc[:0], "no runs to analyse"),
    "infinite tokens": (_set("tokens", "inf"), "column 'tokens' row 4 must be a positive number"),
    "negative LR": (_set("lr", -3e-3), "column 'lr' row 4 must be a finite positive number"),
    "infinite LR": (_set("lr", "-inf"), "column 'lr' row 4"),
    "negative flops": (_set("flops", -1.0), "column 'flops' row 4"),
    "infinite seed": (_set("seed", "inf"), "column 'seed' row 4 must hold an integer"),
    "negative loss": (_set("final_val_loss", -4.1), "column 'final_val_loss' row 4 is -4.1"),
    "zero loss": (_set("final_val_loss", 0.0), "column 'final_val_loss' row 4 is 0"),
    "rows twice": (lambda f: pd.concat([f, f]), "rows 1 and 25 are the same run"),
    "one row twice": (lambda f: pd.concat([f, f.iloc[[5]]]), "rows 6 and 25 are the same run"),
}


@pytest.mark.parametrize(("edit", "fragment"), BAD_TABLES.values(), ids=BAD_TABLES.keys())
def test_a_bad_run_table_is_one_line_naming_file_column_and_row(tmp_path, edit, fragment):
    """A header-only CSV was an IndexError, infinite tokens an AssertionError from the fit, a
    negative LR `math domain error` naming nothing; negative losses were dropped silently and
    repeated rows counted twice; 10^6 rows ended in a NaN from a root finder."""
    path = tmp_path / "runs.csv"
    edit(_table()).to_csv(path, index=False)
    out = tmp_path / "out"
    args = ["analyze", "--runs-csv", str(path), "--out", str(out), "--resamples", "10"]
    result = CliRunner().invoke(_cli(), args)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    (line,) = [x for x in result.output.splitlines() if x.startswith("error:")]
    assert str(path) in line and fragment in line, line
    assert not out.exists()


def test_a_million_rows_are_refused_before_any_fit(tmp_path):
    """10^6 rows ended in `The function value at x=9.99 is NaN` after minutes of fitting; a
    table over the largest study's runs is one line, read and refused before any fit."""
    frame = _table()
    lines = frame.to_csv(index=False).splitlines()
    seed = list(frame.columns).index("seed")
    body = [line.split(",") for line in lines[1:]]
    rows = (",".join([*r[:seed], str(i), *r[seed + 1 :]]) for i, r in enumerate(body * 41_667))
    path = tmp_path / "runs.csv"
    path.write_text("\n".join([lines[0], *rows]) + "\n")
    out = tmp_path / "out"
    args = ["analyze", "--runs-csv", str(path), "--out", str(out)]
    result = CliRunner().invoke(_cli(), args)
    assert result.exit_code == 2, result.output
    (line,) = [x for x in result.output.splitlines() if x.startswith("error:")]
    assert f"{str(path)}: 1,000,008 rows, over the {MAX_RUNS:,} runs" in line, line
    assert not out.exists()


def test_an_arm_whose_every_run_diverged_is_named_not_dropped(tmp_path):
    """Item 7: every run of the only other arm diverged: no verdict at all was exit 0 with
    `variants: []`; now one line says which arm has no usable run and why (exit 2; `scaling
    run` reports it as an inconclusive analysis, exit 3)."""
    frame = _table()
    frame.loc[frame["variant"] == "nonlinear", "status"] = "diverged"
    path = tmp_path / "runs.csv"
    frame.to_csv(path, index=False)
    out = tmp_path / "out"
    args = ["analyze", "--runs-csv", str(path), "--out", str(out), "--resamples", "10"]
    result = CliRunner().invoke(_cli(), args)
    assert result.exit_code == 2, result.output
    (line,) = [x for x in result.output.splitlines() if x.startswith("error:")]
    assert "no usable runs of 'nonlinear' (12 diverged)" in line, line
    assert "no verdict against the baseline 'linear'" in line, line
    assert not out.exists()


def test_with_another_arm_judged_a_dead_arm_gets_its_own_verdict_line():
    """Three arms, one whose every run diverged: the other is judged, the dead one is listed in
    verdict.json's `unjudged` and printed as a line of its own."""
    frame = make_study({**STUDY, "gated": Effect(k0=1.2)}, sizes=SIZES, num_seeds=3)
    frame.loc[frame["variant"] == "gated", "status"] = "failed"
    verdict = analyse(frame, table_judgement("linear", num_resamples=10)).verdict
    assert [v["variant"] for v in verdict["variants"]] == ["nonlinear"]
    assert verdict["unjudged"] == [{"variant": "gated", "reason": "no usable runs (12 failed)"}]
    assert "gated vs linear: no verdict: no usable runs (12 failed)" in verdict_lines(verdict)


def test_a_study_whose_every_cell_failed_before_logging_is_a_value_error(mlflow_server):
    """Item 5: cells that failed before logging their size leave no row; the empty table was an
    IndexError (exit 1 from `scaling run`), now the ValueError `run` reports as an inconclusive
    analysis (exit 3, tests/scaling/driver/test_run_inconclusive.py)."""
    uri = mlflow_server
    client = MlflowClient(uri)
    experiment = f"e-{uuid.uuid4().hex[:8]}"
    exp_id = client.create_experiment(experiment)
    for seed in range(2):
        tags = {
            contract.TAG_STUDY: experiment,
            contract.TAG_VARIANT: "linear",
            contract.TAG_SEED: str(seed),
            contract.TAG_SIZE: "30K",
        }
        run = client.create_run(exp_id, tags=tags)
        client.set_terminated(run.info.run_id, "FAILED")
    with pytest.raises(ValueError, match="no runs to analyse"):
        load_study_runs(uri, experiment, experiment)


def test_a_table_under_the_cap_still_loads(tmp_path):
    """The cap is on the table's size, not on a real study: a valid table loads unchanged."""
    path = tmp_path / "runs.csv"
    _table().to_csv(path, index=False)
    assert len(load_csv(path)) == len(_table())
