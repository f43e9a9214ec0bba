"""Bad input, round two (issue 39): no secret in any message, and one `error:` line (exit 2,
nothing written) for duplicate keys, zero and non-finite numbers, impossible paths, unwritable
folders, truncated state files and a grid over the cap."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from foundation.secrets import PASSWORD_ENV
from scaling.cli import app
from scaling.driver.environment import load_study_spec
from tests.scaling.conftest import small_spec

PASSWORD = "Rt2-s3cret-pw"
REPO = Path(__file__).resolve().parents[4]


@pytest.fixture
def study(tmp_path, data_dir, monkeypatch):
    """A valid tiny study file in its own folder (its store and outputs inside `tmp_path`)."""
    # an unrelated password in the environment: `redact` masks that one, not the planted one
    monkeypatch.setenv(PASSWORD_ENV, "unrelated-env-password")
    spec = small_spec(data_dir, tmp_path / "out", f"sqlite:///{tmp_path / 'mlflow.db'}")
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path, spec


def _plan(path: Path, *args: str):
    return CliRunner().invoke(app, ["plan", "--no-check-environment", *args, str(path)])


def _one_error(result, path: Path) -> str:
    """The refusal: exit 2, exactly one `error:` line, naming the study file, no traceback."""
    out = result.output
    assert result.exit_code == 2, out
    assert result.exception is None or isinstance(result.exception, SystemExit), out
    assert "Traceback" not in out and PASSWORD not in out, out
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and str(path) in errors[0], out
    return out[out.index("error:") :]


def _nothing_written(tmp_path: Path) -> None:
    assert not (tmp_path / "out").exists() and not (tmp_path / "mlflow.db").exists()


# --- D1: secrets never echoed -------------------------------------------------------------------

BAD_URIS = {
    "typo scheme": f"htp://alice:{PASSWORD}@127.0.0.1:5000",
    "no //": f"htp//alice:{PASSWORD}@127.0.0.1:5000",
    "unknown scheme": f"ftp://alice:{PASSWORD}@127.0.0.1/",
    "login in sqlite": f"sqlite://alice:{PASSWORD}@host/mlflow.db",
    "no host": f"http://alice:{PASSWORD}@",
    "a list": [f"http://alice:{PASSWORD}@127.0.0.1:5000"],
    "a mapping": {"uri": f"HTTP://alice:{PASSWORD}@127.0.0.1:5000"},
}


@pytest.mark.parametrize("uri", BAD_URIS.values(), ids=BAD_URIS.keys())
def test_a_malformed_tracking_uri_never_shows_its_password(study, tmp_path, uri) -> None:
    path, spec = study
    spec["mlflow"]["tracking_uri"] = uri
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    assert "study.mlflow.tracking_uri" in _one_error(_plan(path), path)
    _nothing_written(tmp_path)


@pytest.mark.parametrize(
    ("opening", "after"), [("'", ""), ('"', ""), ("[", ""), ("", "\tbad: a tab\n")]
)
def test_a_yaml_error_on_the_uri_line_never_quotes_it(study, tmp_path, opening, after) -> None:
    """PyYAML's own message quotes the line it stopped on; ours gives its number only."""
    path, spec = study
    spec["mlflow"]["tracking_uri"] = "PLACEHOLDER"
    text = yaml.safe_dump(spec, sort_keys=False)
    line = f"{opening}http://alice:{PASSWORD}@127.0.0.1:5000\n{after}"
    path.write_text(text.replace("PLACEHOLDER\n", line))
    message = _one_error(_plan(path), path)
    assert "not valid YAML (line " in message and "fix the syntax" in message, message
    _nothing_written(tmp_path)


def test_an_upper_case_scheme_is_a_valid_uri_and_its_login_is_taken_out(study) -> None:
    path, spec = study
    spec["mlflow"]["tracking_uri"] = f"HTTP://alice:{PASSWORD}@127.0.0.1:5000"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    loaded = load_study_spec(path, check_environment=False)
    assert loaded.mlflow.tracking_uri == "http://127.0.0.1:5000"
    assert os.environ[PASSWORD_ENV] == PASSWORD  # exported for MLflow's client, as any login


# --- D7: duplicate keys -----------------------------------------------------------------------


def test_a_key_given_twice_is_refused_naming_both_lines(study, tmp_path) -> None:
    path, spec = study
    lines = yaml.safe_dump(spec, sort_keys=False).splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("seeds:")) + 1
    lines.append("seeds: [5]")
    path.write_text("\n".join(lines) + "\n")
    message = _one_error(_plan(path), path)
    assert f"line {len(lines)}: key 'seeds' is given twice (first on line {first})" in message
    _nothing_written(tmp_path)


def test_a_nested_key_given_twice_in_json_is_refused(study, tmp_path) -> None:
    path, spec = study
    text = json.dumps(spec).replace('"seq_length": 32', '"seq_length": 32, "seq_length": 64')
    json_path = path.with_suffix(".json")
    json_path.write_text(text)
    assert "key 'seq_length' is given twice" in _one_error(_plan(json_path), json_path)


# --- D4, D6: zero, non-finite, impossible paths, truncated state ----------------------------------


def _edit(spec: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        spec = spec[key]
    spec[last] = value


BAD_VALUES = [
    ("model.seq_length", 0, "study.model.seq_length: 0 must be a whole number >= 1"),
    ("lr", {"grid": {"*": {"30K": [float("inf")], "60K": [1e-3]}}}, "study.lr.grid.*.30K[0]: inf"),
    ("optimizer", {"weight_decay": float("nan")}, "study.optimizer.weight_decay: nan is not"),
    ("schedule", {"warmup_steps": ""}, "study.schedule.warmup_steps: ''; give a whole number"),
    ("name", "n" * 300, "study.name: 300 characters, over 100"),
    ("output_dir", "/tmp/" + "d" * 300, "study.output_dir: the name ddd"),
]


@pytest.mark.parametrize(("field", "value", "expected"), BAD_VALUES, ids=[b[0] for b in BAD_VALUES])
def test_a_bad_value_is_one_line_before_anything_is_written(
    study, tmp_path, field, value, expected
) -> None:
    path, spec = study
    _edit(spec, field, value)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    assert expected in _one_error(_plan(path), path)
    _nothing_written(tmp_path)


def test_an_output_dir_that_is_a_file_is_one_line(study, tmp_path) -> None:
    path, spec = study
    (tmp_path / "out").write_text("a file where the study folder should be\n")
    message = _one_error(_plan(path), path)
    assert f"study.output_dir: {tmp_path / 'out'} is a file, not a folder" in message
    assert not (tmp_path / "mlflow.db").exists()


STATE_FILES = {  # the state file, and what makes the study read it
    "lr_search.json": ("lr", {"grid": {"*": {"30K": [1e-3], "60K": [1e-3]}}, "search": {}}),
    "looks.json": ("seeds", {"start": 3, "max": 5, "step": 1}),
}


@pytest.mark.parametrize("name", STATE_FILES)
def test_a_truncated_state_file_is_named_with_its_fix(study, tmp_path, name) -> None:
    path, spec = study
    field, value = STATE_FILES[name]
    spec[field] = value
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / name).write_text('{"added": [{"size": "30K", ')  # cut short
    message = _one_error(_plan(path), path)
    assert str(tmp_path / "out" / name) in message and "delete it to" in message, message
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [name]
    assert not (tmp_path / "mlflow.db").exists()


# --- D6, D10: read-only folders (checked as a user the folder is closed to) ----------------------


def _as_nobody() -> list[str]:
    """Root may write anywhere: run the command as `nobody` so permissions mean something."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root and setpriv is missing: cannot check a read-only folder")
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.mark.parametrize("closed", ["study folder", "its parent", "data folder"])
def test_a_read_only_folder_is_refused_before_anything_is_made(data_dir, closed) -> None:
    root = Path(tempfile.mkdtemp(prefix="readonly-"))  # not under pytest's 0700 tmp
    try:
        root.chmod(0o755)
        data = root / "data"
        shutil.copytree(data_dir, data)
        parent = root / "parent"
        parent.mkdir()
        spec = small_spec(data, parent / "study", f"sqlite:///{root / 'store' / 'mlflow.db'}")
        path = root / "study.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        for place in (root, parent, root / "store"):
            place.mkdir(exist_ok=True)
            place.chmod(0o777)
        shutil.rmtree(data / "cache", ignore_errors=True)
        if closed != "data folder":
            data.chmod(0o777)
        if closed == "study folder":
            (parent / "study").mkdir(mode=0o555)
            (parent / "study").chmod(0o555)
            field = "study.output_dir"
        elif closed == "its parent":
            parent.chmod(0o555)
            field = "study.output_dir"
        else:
            field = "study.data.path"  # 0755, not ours: each job's cache/.lock cannot be made
        proc = subprocess.run(
            [*_as_nobody(), sys.executable, "-m", "scaling", "submit", str(path)],
            cwd=REPO,
            env={**os.environ, "HOME": str(root), "OMP_NUM_THREADS": "1"},
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
        errors = [line for line in proc.stderr.splitlines() if line.strip()]
        assert len(errors) == 1 and errors[0].startswith(f"error: {path}: {field}: "), errors
        assert "not writable" in errors[0] and "Traceback" not in proc.stderr
        assert not list((root / "store").iterdir())  # no MLflow store
        assert not (data / "cache").exists()
    finally:
        for place in (root, *root.rglob("*")):
            if place.is_dir():
                place.chmod(0o755)
        shutil.rmtree(root)


# --- D5: the scale guard -------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_a_grid_over_the_cap_is_refused_at_once(study, tmp_path) -> None:
    path, spec = study
    spec["seeds"] = list(range(30_000))  # 2 sizes x 2 arms x 1 LR x 30,000 seeds = 120,000
    spec["lr"] = {"grid": {"*": {"30K": [1e-3], "60K": [1e-3]}}}
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    message = _one_error(_plan(path), path)
    # refused by arithmetic before a cell is built: only `check_grid_size` counts them so
    assert "study: 120,000 cells" in message and "over the cap of 100,000" in message
    _nothing_written(tmp_path)
