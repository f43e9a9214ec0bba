"""`scaling plan STUDY --noise SOURCE [--target-gain PCT]`: the power planner on each source."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from analysis.judgement import table_judgement
from analysis.stats.analyze import grid_terms
from analysis.stats.planning import power as P
from analysis.synthetic.studies import Effect, make_study
from analysis.tables.runs import load_csv
from scaling.cli import app
from tests.scaling.conftest import small_spec

DEMO_RUNS = Path(__file__).parents[2] / "analysis" / "demo_runs.csv"
SEEDS = [0, 1, 2]


def _spec(tmp_path: Path, data_dir: Path, uri: str | None = None, experiment: str | None = None):
    spec = small_spec(data_dir, tmp_path / "study", uri or f"sqlite:///{tmp_path}/m.db")
    spec["seeds"] = SEEDS
    if experiment:
        spec["mlflow"]["experiment"] = experiment
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _plan(path: Path, *args: str):
    return CliRunner().invoke(app, ["plan", str(path), "--no-check-environment", *args])


def _power_rows(output: str) -> dict[str, list[str]]:
    """The power table's rows by size (rich draws `│`-separated cells)."""
    table = output[output.index("power (noise from") :]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃]", line)[1:-1]]
        if cells and cells[0] in ("30K", "60K"):
            rows[cells[0]] = cells
    return rows


def test_plan_with_a_number(tmp_path, data_dir):
    res = _plan(_spec(tmp_path, data_dir), "--noise", "0.3", "--target-gain", "1.0")
    assert res.exit_code == 0, res.output
    rows = _power_rows(res.output)
    assert set(rows) == {"30K", "60K"}
    for _, source, sd, seeds, mde, needed, power in rows.values():
        assert (source, sd, seeds) == ("all", "0.3%", "3")
        assert mde == f"{P.mde(0.3, 3):.3g}%"
        assert needed == str(P.seeds_needed(0.3, 1.0))
        assert power == f"{100 * P.power_of(1.0, 0.3, 3):.0f}%"
    assert "cell" in res.output and "CPU-hours" in res.output  # the cost table is still there


def test_plan_with_a_run_csv_takes_the_nearest_measured_size(tmp_path, data_dir):
    res = _plan(_spec(tmp_path, data_dir), "--noise", str(DEMO_RUNS))
    assert res.exit_code == 0, res.output
    measured = P.noise_from_source(str(DEMO_RUNS), baseline="linear")
    assert list(measured) == ["50K", "100K", "300K", "800K"]
    # one LR per cell: the source shows no LR grid term, so the table has no column for it
    assert set(grid_terms(load_csv(DEMO_RUNS), table_judgement("linear")).values()) == {0.0}
    rows = _power_rows(res.output)
    for size in ("30K", "60K"):  # both nearest (in log N) to the CSV's 50K
        _, source, sd, seeds, mde = rows[size]
        assert source == "50K" and sd == f"{measured['50K']:.3g}%"
        assert mde == f"{P.mde(measured['50K'], 3):.3g}%"


def _log_study(uri: str, experiment: str, name: str, table) -> None:
    from mlflow.tracking import MlflowClient

    from foundation import contract as C

    client = MlflowClient(tracking_uri=uri)
    exp_id = C.ensure_experiment(client, experiment, uri)
    for _, row in table.iterrows():
        tags = {"study": name, "variant": row["variant"], "size": row["size"],
                "seed": str(row["seed"]), "lr": "0.001", "outcome": "completed"}  # fmt: skip
        run = client.create_run(exp_id, tags=tags).info.run_id
        for key in ("num_nonembedding_params", "tokens", "flops", "final_val_loss"):
            client.log_metric(run, key, float(row[key]))
        client.set_terminated(run, "FINISHED")


def test_plan_with_a_finished_studys_mlflow_runs(tmp_path, data_dir):
    """By spec path and by name (read from the planned study's own MLflow experiment)."""
    uri, experiment = f"sqlite:///{tmp_path}/finished.db", "earlier"
    table = make_study(
        {"linear": Effect(), "nonlinear": Effect(k0=1.2)}, sizes=(3e4, 6e4), num_seeds=4
    )
    _log_study(uri, experiment, "pilot", table)
    expected = P.noise_from_table(table, baseline="linear")
    assert list(expected) == ["30K", "60K"]
    source = tmp_path / "pilot.yaml"
    mlflow = {"experiment": experiment, "tracking_uri": uri}
    source.write_text(yaml.safe_dump({"name": "pilot", "mlflow": mlflow}))
    plan_path = _spec(tmp_path, data_dir, uri, experiment)
    for noise in (str(source), "pilot"):
        res = _plan(plan_path, "--noise", noise, "--target-gain", "0.5")
        assert res.exit_code == 0, res.output
        rows = _power_rows(res.output)
        for size, sd in expected.items():
            assert rows[size][1:3] == [size, f"{sd:.3g}%"]
            assert rows[size][4] == f"{P.mde(sd, 3):.3g}%"
            needed = P.seeds_needed(sd, 0.5)
            assert rows[size][5] == (str(needed) if needed else "more than 10,000")
    res = _plan(plan_path, "--noise", "no-such-study")
    assert res.exit_code == 2 and "no runs tagged study='no-such-study'" in res.output


@pytest.mark.parametrize(
    "noise, message",
    [
        ("-0.3", "--noise -0.3: a seed sd (% of loss) must be a positive number"),
        ("missing.csv", "--noise missing.csv: no such file; give a number"),
        ("studies/none.yaml", "--noise studies/none.yaml: no such file"),
        ("a/b c", "--noise a/b c: not a number, a run CSV or a study; give a number"),
    ],
)
def test_a_bad_source_is_refused_first_naming_it_and_the_three_forms(tmp_path, noise, message):
    # the study path does not exist either: the source is checked before anything else
    res = CliRunner().invoke(app, ["plan", str(tmp_path / "absent.yaml"), "--noise", noise])
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output
    if "give" in message:
        assert "a run CSV" in res.output and "a finished study" in res.output


def test_target_gain_must_be_positive_and_needs_a_noise_source(tmp_path):
    absent = str(tmp_path / "absent.yaml")
    res = CliRunner().invoke(app, ["plan", absent, "--noise", "0.3", "--target-gain", "0"])
    assert res.exit_code == 2 and "--target-gain 0.0: must be a positive gain" in res.output
    res = CliRunner().invoke(app, ["plan", absent, "--target-gain", "1"])
    assert res.exit_code == 2 and "--target-gain needs --noise SOURCE" in res.output
